"""The Chart view beside the grid: the current result's loaded rows as a bar, line or scatter plot.

Library: pyqtgraph, chosen over PySide6's QtCharts/QtGraphs because
- size: pyqtgraph is a ~1.5 MB pure-Python wheel over numpy (already a dependency); QtCharts
  lives in PySide6-Addons, a ~150 MB wheel that must match the pinned PySide6-Essentials release
  exactly (``<6.12``), which is one more thing to keep in lockstep;
- speed: it draws numpy arrays as one QPainterPath, with clipping to the view and peak-preserving
  downsampling, so a 100,000-point line renders near the 200 ms target (``benchmarks/ui.py``
  measures it); a scatter prepares each point in Python, so past ``MAX_SCATTER`` points an evenly
  spaced sample is drawn (and the status line says so); QtCharts' QLineSeries holds a QPointF per
  point and slows down past ~10k;
- the dark palette: background and every pen are set from the app's QPalette (``apply_palette``).
It is imported on first use (the Chart tab), so it costs nothing at launch.

Readable without the table (issue 20): the legend has a row of its own under the plot, never over
a bar or a point; every category is named (``ui.chart_axis``: upright when the names do not fit
side by side); hovering shows the exact values of the bar or point under the pointer.  The
exported PNG and SVG paint the same scene, legend and names included.

Which chart and which columns is ``core.chart_plan``'s decision; this module only draws it, says
how many rows it covers, and exports PNG or SVG.  Rendering touches the scene and so runs on the UI
thread; writing the file runs on the pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop.core.chart_plan import CHART_KINDS, ChartKind, ChartPlan, choose_chart, x_values, y_values
from sqale_desktop.ui.palette import is_dark

MAX_BARS = 2000
"""Bars drawn at most (the first ones); more are unreadable and slow, and the view says so."""
HOVER_PX = 12
"""A line or scatter point is read out when the pointer is this close to it."""
LEGEND_ROW = 4
"""The plot item's layout row under the bottom axis (pyqtgraph puts its axes in rows 1 to 3)."""
HINT = "Hover over the chart for exact values."
MAX_SCATTER = 25_000
"""Points a scatter draws at most: pyqtgraph prepares each point of a scatter in Python (about
4 µs each), so past this an evenly spaced sample is drawn, and the view says so."""

# Colour-blind-safe series colours (Okabe–Ito), readable on the light and the dark background.
SERIES_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")
SERIES_COLOURS_DARK = ("#56B4E9", "#E69F00", "#3DD6A3", "#E89AC7", "#7FB8F0", "#FF7F50")


def _pg() -> Any:
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=False, useNumba=False)
    return pg


class ChartView(QWidget):
    """Kind chooser, export buttons, a status line and the plot.

    Signals:
        export_requested(str): "png" or "svg" (the panel asks where and writes on the pool).
        rendered(str): the status line, after each render.
    """

    export_requested = Signal(str)
    rendered = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        pg = _pg()
        self._pg = pg
        self.kind_box = QComboBox(self)
        self.kind_box.setObjectName("chartKind")
        for kind in CHART_KINDS:
            self.kind_box.addItem(kind.capitalize(), kind)
        self.kind_box.activated.connect(lambda _i: self._kind_chosen())
        self.png_button = QPushButton("Export PNG…", self)
        self.png_button.clicked.connect(lambda: self.export_requested.emit("png"))
        self.svg_button = QPushButton("Export SVG…", self)
        self.svg_button.clicked.connect(lambda: self.export_requested.emit("svg"))
        self.status = QLabel("", self)
        self.status.setObjectName("chartStatus")
        self.status.setWordWrap(True)
        self.plot = pg.PlotWidget(self)
        self.plot.setObjectName("chartPlot")
        self.plot.setMenuEnabled(False)
        self.readout = QLabel(HINT, self)
        self.readout.setObjectName("chartReadout")
        self.readout.setWordWrap(True)  # a long readout wraps; it never widens the window
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.plot.scene().sigMouseMoved.connect(self._hover)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Chart:", self))
        bar.addWidget(self.kind_box)
        bar.addWidget(self.status, 1)
        bar.addWidget(self.png_button)
        bar.addWidget(self.svg_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.readout)
        self._columns: list[str] = []
        self._rows: Sequence[Sequence[Any]] = ()
        self._complete = True
        self._chosen: ChartKind | None = None
        self.plan: ChartPlan | None = None
        self._axis_kind = "number"
        self._categories: list[str] = []
        self.legend: Any = None  # pyqtgraph's LegendItem, in its own layout row
        # What the readout reads: per series its name, the rows drawn, their x and y.
        self._series: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = []
        self._rule = ""  # how the category names are thinned, when they are
        self.apply_palette()
        self._enable(False)

    # data ------------------------------------------------------------------------------------
    def set_data(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        complete: bool,
        kind: ChartKind | None = None,
    ) -> None:
        """Chart these rows (the grid's loaded rows; ``complete``: they are the whole result) as
        ``kind``, or as the user last chose for these columns, or as ``core.chart_plan`` decides."""
        if kind is not None:
            self._chosen = kind
        elif list(columns) != self._columns:
            self._chosen = None  # another result: the automatic choice again
        self._columns = list(columns)
        self._rows = rows
        self._complete = complete
        self.redraw()

    def set_kind(self, kind: ChartKind) -> None:
        self._chosen = kind
        self.redraw()

    def _kind_chosen(self) -> None:
        self.set_kind(self.kind_box.currentData())

    # drawing ---------------------------------------------------------------------------------
    def redraw(self) -> str:
        """Draw the plan for the current rows; returns (and shows) the status line.

        Not named ``render``: that is ``QWidget.render(paint_device, ...)``, which Qt and grabbing
        code call with arguments, so shadowing it would break them."""
        plot = self.plot.getPlotItem()
        plot.clear()
        self._remove_legend()
        self._series = []
        self._set_readout("")
        rows = self._rows
        plan = choose_chart(self._columns, rows, self._chosen) if rows else None
        self.plan = plan
        if plan is None:
            text = (
                "Run a query to chart its result."
                if not self._columns
                else "Nothing to chart: the result has no numeric column."
            )
            self._enable(False)
            return self._say(text)
        self.kind_box.setCurrentIndex(CHART_KINDS.index(plan.kind))
        categories: list[str]
        if plan.x is None:
            xs, categories = np.arange(len(rows), dtype=float), []
        elif plan.x_kind == "number":
            xs, categories = _numbers(plan.x, rows), []
        else:
            xs_list, categories = x_values(plan, rows)
            xs = np.asarray(xs_list, dtype=float)
        shown = len(rows)
        if plan.kind == "bar" and shown > MAX_BARS:
            xs = xs[:MAX_BARS]
            shown = MAX_BARS
        every = -(-len(rows) // MAX_SCATTER) if plan.kind == "scatter" else 1
        self._set_bottom_axis(plan.x_kind if plan.x_kind in ("date", "text") else "number")
        colours = SERIES_COLOURS_DARK if is_dark() else SERIES_COLOURS
        width = 0.8 / len(plan.ys)
        drawn: list[tuple[Any, str]] = []
        for n, column in enumerate(plan.ys):
            ys = _numbers(column, rows[:shown])
            colour = QColor(colours[n % len(colours)])
            name = plan.y_labels[n]
            at = np.arange(len(ys))
            if plan.kind == "bar":
                step = _bar_step(xs) if plan.x_kind != "text" else 1.0
                offset = (n - (len(plan.ys) - 1) / 2) * width * step
                item = self._pg.BarGraphItem(
                    x=xs + offset,
                    height=np.nan_to_num(ys),
                    width=width * step,
                    brush=colour,
                    pen=None,
                    name=name,
                )
                plot.addItem(item)
                self._series.append((name, at, xs, ys))
            elif plan.kind == "line":
                order = np.argsort(xs, kind="stable") if plan.x_kind != "text" else slice(None)
                self._series.append((name, at, xs, ys))
                item = plot.plot(
                    xs[order],
                    ys[order],
                    pen=self._pg.mkPen(colour, width=1),  # 1 px: Qt's fast path; 1.5 px takes 4x longer
                    name=name,
                    connect="finite",
                    autoDownsample=True,
                    downsampleMethod="peak",
                )
            else:
                # A ScatterPlotItem of its own: through PlotDataItem's symbols the same 100,000
                # points take several times longer to set up.
                finite = np.isfinite(xs) & np.isfinite(ys)
                finite[np.arange(len(finite)) % every != 0] = False
                item = self._pg.ScatterPlotItem(
                    x=xs[finite],
                    y=ys[finite],
                    size=5,
                    pen=None,
                    brush=self._pg.mkBrush(colour),
                    pxMode=True,
                    name=name,
                )
                plot.addItem(item)
                self._series.append((name, at[finite], xs[finite], ys[finite]))
            drawn.append((item, name))
        if len(drawn) > 1:
            self._add_legend(drawn)
        self._categories = categories[: int(np.nanmax(xs)) + 1] if plan.x_kind == "text" and len(xs) else []
        if self._axis_kind == "text":
            plot.getAxis("bottom").set_names(self._categories)
        plot.setLabel("bottom", plan.x_label)
        plot.setLabel("left", ", ".join(plan.y_labels))
        plot.enableAutoRange()
        self._enable(True)
        what = f"{plan.kind} chart of {', '.join(plan.y_labels)} by {plan.x_label}"
        if not self._complete:
            rows_text = f"the {len(rows):,} loaded rows (the result has more; scroll the grid to load them)"
        else:
            rows_text = f"all {len(rows):,} row{'s' if len(rows) != 1 else ''}"
        if shown < len(rows):
            rows_text = f"the first {shown:,} of {rows_text}"
        elif every > 1:
            rows_text = f"one row in {every} of {rows_text}"
        return self._say(f"{what.capitalize()}, from {rows_text}.")

    def _add_legend(self, drawn: list[tuple[Any, str]]) -> None:
        """The series' names in a row of their own under the plot: a legend inside the view box
        covered the tallest bar (issue 20: USA's 523.06 read as ~435)."""
        text_colour = QApplication.palette().color(QPalette.ColorRole.Text)
        legend = self._pg.LegendItem(labelTextColor=text_colour, horSpacing=12)
        legend.setColumnCount(len(drawn))  # side by side, one row
        for item, name in drawn:
            legend.addItem(item, name)
        # Sized now, before the layout owns it: LegendItem sizes itself only as entries are added.
        legend.setMinimumSize(legend.width(), legend.height())
        legend.setMaximumSize(legend.width(), legend.height())
        layout = self.plot.getPlotItem().layout
        layout.addItem(legend, LEGEND_ROW, 1)
        layout.setAlignment(legend, Qt.AlignmentFlag.AlignHCenter)
        self.legend = legend

    def _remove_legend(self) -> None:
        if self.legend is None:
            return
        self.plot.getPlotItem().layout.removeItem(self.legend)
        scene = self.legend.scene()
        if scene is not None:
            scene.removeItem(self.legend)
        self.legend = None

    # the readout -----------------------------------------------------------------------------
    def _hover(self, position: QPointF) -> None:
        """The exact values under the pointer (scene coordinates), in the line under the plot (not
        a tooltip: a tooltip window under the pointer takes the next moves from the plot)."""
        self._set_readout(self.readout_at(position))

    def readout_at(self, position: QPointF) -> str:
        """What the readout says for the pointer at ``position`` (scene coordinates): the row of
        the bar under it, or of the nearest point within ``HOVER_PX``; "" over nothing."""
        plan = self.plan
        box = self.plot.getPlotItem().getViewBox()
        if plan is None or not self._series or not box.sceneBoundingRect().contains(position):
            return ""
        at = box.mapSceneToView(position)
        row: int | None = None
        if plan.kind == "bar":
            _name, rows, xs, _ys = self._series[0]
            step = _bar_step(xs) if plan.x_kind != "text" else 1.0
            distance = np.abs(xs - at.x())
            if len(distance) and np.isfinite(distance).any():
                nearest = int(np.nanargmin(distance))
                if distance[nearest] <= 0.5 * step:
                    row = int(rows[nearest])
        else:
            (x0, x1), (y0, y1) = box.viewRange()
            sx = box.width() / ((x1 - x0) or 1.0)
            sy = box.height() / ((y1 - y0) or 1.0)
            best = float(HOVER_PX**2)
            for _name, rows, xs, ys in self._series:
                if not len(xs):
                    continue
                far = ((xs - at.x()) * sx) ** 2 + ((ys - at.y()) * sy) ** 2
                if not np.isfinite(far).any():
                    continue
                nearest = int(np.nanargmin(far))
                if far[nearest] <= best:
                    best, row = float(far[nearest]), int(rows[nearest])
        if row is None:
            return ""
        values = self._rows[row]
        where = f"row {row + 1:,}" if plan.x is None else f"{plan.x_label} {_exact(values[plan.x])}"
        shown = ", ".join(f"{plan.y_labels[n]} {_exact(values[c])}" for n, c in enumerate(plan.ys))
        return f"{where}: {shown}"

    def _set_readout(self, text: str) -> None:
        self.readout.setText(text or " ".join(filter(None, [self._rule, HINT])))

    def _thinned(self, every: int) -> None:
        """The category axis labels every ``every``-th name (no room for all): say so."""
        self._rule = (
            ""
            if every <= 1
            else f"Every {_ordinal(every)} {self.plan.x_label if self.plan else 'name'} is labelled "
            "(no room for all)."
        )
        self._set_readout("")

    def _say(self, text: str) -> str:
        self.status.setText(text)
        self.status.setToolTip(text)
        self.rendered.emit(text)
        return text

    def _set_bottom_axis(self, kind: str) -> None:
        if kind == self._axis_kind:
            return
        plot = self.plot.getPlotItem()
        if kind == "text":
            from sqale_desktop.ui.chart_axis import CategoryAxis

            axis = CategoryAxis()
            axis.on_every = self._thinned
        elif kind == "date":
            axis = self._pg.DateAxisItem(orientation="bottom")
        else:
            axis = self._pg.AxisItem("bottom")
        if self._rule:
            self._thinned(1)
        plot.setAxisItems({"bottom": axis})
        self._axis_kind = kind
        self.apply_palette()

    def _enable(self, enabled: bool) -> None:
        for widget in (self.png_button, self.svg_button, self.kind_box):
            widget.setEnabled(enabled)

    def apply_palette(self) -> None:
        """Background and pens from the app's palette (light or dark)."""
        app = QApplication.instance()
        palette = app.palette() if isinstance(app, QApplication) else QPalette()
        background = palette.color(QPalette.ColorRole.Base)
        foreground = palette.color(QPalette.ColorRole.Text)
        self.plot.setBackground(background)
        plot = self.plot.getPlotItem()
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            axis.setPen(self._pg.mkPen(foreground))
            axis.setTextPen(self._pg.mkPen(foreground))
            axis.label.setDefaultTextColor(foreground)
        plot.showGrid(x=True, y=True, alpha=0.15)

    # export ----------------------------------------------------------------------------------
    def render_image(self, width: int = 1600) -> QImage:
        """The chart as an image ``width`` pixels wide (for PNG export and tests): the widget as
        shown, its scene painted scaled into the image, so names, ticks and the legend row keep
        their size relative to the plot (pyqtgraph's ImageExporter gave an export whose fonts and
        legend did not match the chart on screen, issue 32)."""
        size = self.plot.size()
        scale = width / max(1, size.width())
        image = QImage(width, max(1, round(size.height() * scale)), QImage.Format.Format_ARGB32)
        image.fill(self.plot.backgroundBrush().color())
        painter = QPainter(image)
        try:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
            # QGraphicsView.render: the view's contents scaled into the whole image
            self.plot.render(painter, QRectF(image.rect()), self.plot.viewport().rect())
        finally:
            painter.end()
        return image

    def svg_bytes(self) -> bytes:
        """The chart as SVG, painted by Qt's own QSvgGenerator: pyqtgraph's SVGExporter fails on
        this PySide6 (its path parser gets coordinates it cannot split)."""
        from PySide6.QtCore import QBuffer, QIODevice
        from PySide6.QtSvg import QSvgGenerator

        buffer = QBuffer()
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        generator = QSvgGenerator()
        generator.setOutputDevice(buffer)
        size = self.plot.size()
        generator.setSize(size)
        generator.setViewBox(QRectF(0, 0, size.width(), size.height()))
        generator.setTitle(self.status.text())
        painter = QPainter(generator)
        try:
            self.plot.render(painter)
        finally:
            painter.end()
        return bytes(buffer.data().data())


def _numbers(column: int, rows: Sequence[Sequence[Any]]) -> np.ndarray:
    """A numeric column as floats, NULL as NaN: numpy converts the column in one call (a tenth of
    the time of a Python loop on 100,000 rows); a column with other values takes the slow path."""
    values = [row[column] for row in rows]
    try:
        return np.array(values, dtype=float)
    except (TypeError, ValueError):
        return np.asarray(y_values(column, rows), dtype=float)


def _bar_step(xs: np.ndarray) -> float:
    """The smallest gap between distinct x values, so bars over numbers or dates do not overlap."""
    finite = np.unique(xs[np.isfinite(xs)])
    if len(finite) < 2:
        return 1.0
    return float(np.min(np.diff(finite)))


def _exact(value: Any) -> str:
    """A value as a person reads it, exactly: a float to 15 significant digits (523.06, not the
    binary noise of 523.0600000000003), numbers grouped by thousands."""
    if isinstance(value, bool) or value is None:
        return "NULL" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return format(value, ",.15g")
    return str(value)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def write_export(path: Path, payload: QImage | bytes) -> Path:
    """Write a rendered chart (a pool job's work: QImage is safe to save off the UI thread)."""
    if isinstance(payload, QImage):
        # PySide6's stubs say the format is bytes, but at run time it takes only str (bytes
        # raise ValueError; checked on PySide6 6.11), so the stub is wrong here, not the call.
        if not payload.save(str(path), "PNG"):  # type: ignore[call-overload]
            raise OSError(f"could not write {path}")
    else:
        path.write_bytes(payload)
    return path
