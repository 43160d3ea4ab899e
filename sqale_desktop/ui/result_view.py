"""The Result tab of the SQL panel: the quick filter bar over the grid, and the models behind them.

Each result gets a fresh ``ResultTableModel`` (paging the statement's cursor) under a fresh
``RowFilterProxy``; the old pair is deleted once the grid shows the new one.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from sqale_desktop.ui.grid_menu import attach_menu
from sqale_desktop.ui.result_grid import ResultGrid
from sqale_desktop.ui.result_model import ResultTableModel
from sqale_desktop.ui.row_filter import FilterBar, Operator, RowFilterProxy
from sqale_desktop.ui.statement_runner import Ran


class ResultView(QWidget):
    """The filter bar and the grid, showing the last result."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model: ResultTableModel | None = None
        self.proxy: RowFilterProxy | None = None
        self.grid = ResultGrid(self)
        attach_menu(self.grid)
        self.filter_bar = FilterBar(self)
        self.grid.filter_requested.connect(self._filter_column)
        self.grid.clear_filter_requested.connect(self.filter_bar.clear)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.filter_bar)
        layout.addWidget(self.grid, 1)

    def show_result(self, ran: Ran) -> ResultTableModel:
        """Show ``ran``'s first page (any filter goes); returns its model, paging on as needed."""
        old, old_proxy = self.model, self.proxy
        model = ResultTableModel(ran.cursor, ran.first, self, sorted_by=ran.statement.sorted_by)
        proxy = RowFilterProxy(self)
        proxy.setSourceModel(model)
        self.model, self.proxy = model, proxy
        self.grid.setModel(proxy)
        self.filter_bar.attach(proxy, model.columns)
        model.rows_loaded.connect(lambda _n: self.filter_bar.describe())
        column, order = ran.statement.sorted_by or (-1, Qt.SortOrder.AscendingOrder)
        self.grid.horizontalHeader().setSortIndicator(column, order)  # a no-op sort: already in order
        self.grid.fit_columns()
        if old is not None:
            old.deleteLater()
        if old_proxy is not None:
            old_proxy.deleteLater()
        return model

    def close_cursor(self) -> None:
        """Finish the shown statement early (its connection is free for the next); rows stay."""
        if self.model is not None:
            self.model.close_cursor()

    def _filter_column(self, column: int, operator: Operator, text: object) -> None:
        self.filter_bar.edit_column(column, operator, None if text is None else str(text))
