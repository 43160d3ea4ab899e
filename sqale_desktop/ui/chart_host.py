"""The Chart tab of the SQL panel (DB Browser for SQLite's ``PlotDock``): a plot of the result.

The ``ChartView`` is built the first time the tab is shown, so pyqtgraph loads then, not at launch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QVBoxLayout, QWidget

if TYPE_CHECKING:
    from sqale_desktop.ui.chart_view import ChartView


class ChartHost(QWidget):
    """Holds the chart once built, and hands it the rows to draw.

    Signals:
        export_requested(str): the chart's "Export PNG/SVG…": "png" or "svg".
    """

    export_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self.chart: ChartView | None = None

    def ensure_chart(self) -> ChartView:
        if self.chart is None:
            from sqale_desktop.ui.chart_view import ChartView

            self.chart = ChartView(self)
            self.chart.export_requested.connect(self.export_requested)
            self._layout.addWidget(self.chart)
        return self.chart

    def show_rows(self, columns: list[str], rows: Sequence[Sequence[Any]], complete: bool) -> None:
        self.ensure_chart().set_data(columns, rows, complete)

    def export_payload(self, fmt: str) -> QImage | bytes:
        """The chart as a PNG image or SVG bytes (on the UI thread, where the plot lives)."""
        chart = self.ensure_chart()
        return chart.render_image() if fmt == "png" else chart.svg_bytes()
