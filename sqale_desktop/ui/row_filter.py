"""The grid's quick filter: per-column conditions (contains / equals / is NULL / is not NULL) over
the rows loaded so far, and the bar above the grid that edits them.

The proxy filters only what is loaded, on purpose: filtering the whole result would mean running
the query again with a WHERE clause built from the user's text, which is the SQL editor's job.
While a filter is on the proxy stops the grid from fetching further pages (otherwise a filter that
matches little would make the view pull page after page to fill itself), and the bar says when the
result has more rows than are loaded.

Sorting goes to the source model (``ResultTableModel.sort``), which sorts in memory or asks for the
query re-run with ORDER BY; the proxy keeps the source's order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget

from sqale_desktop.core.export_formats import cell_text

Operator = Literal["contains", "equals", "is NULL", "is not NULL"]
OPERATORS: tuple[Operator, ...] = ("contains", "equals", "is NULL", "is not NULL")

AnyIndex = QModelIndex | QPersistentModelIndex


@dataclass(frozen=True)
class Condition:
    """One column's condition; text is compared case-insensitively with the cell as copied."""

    column: int
    operator: Operator
    text: str = ""

    def matches(self, value: Any) -> bool:
        if self.operator == "is NULL":
            return value is None
        if self.operator == "is not NULL":
            return value is not None
        if value is None:
            return False
        cell = cell_text(value).casefold()
        needle = self.text.casefold()
        return needle in cell if self.operator == "contains" else cell == needle


class RowFilterProxy(QSortFilterProxyModel):
    """Loaded rows that meet every condition (one per column at most)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._conditions: dict[int, Condition] = {}
        self._refiltering = False

    @property
    def conditions(self) -> list[Condition]:
        return [self._conditions[c] for c in sorted(self._conditions)]

    @property
    def active(self) -> bool:
        return bool(self._conditions)

    def set_condition(self, condition: Condition | None, column: int | None = None) -> None:
        """Set (or with None, drop) the condition of a column."""
        if condition is None:
            if column is not None:
                self._conditions.pop(column, None)
        elif condition.operator in ("contains", "equals") and not condition.text:
            self._conditions.pop(condition.column, None)
        else:
            self._conditions[condition.column] = condition
        self._refilter()

    def clear(self) -> None:
        self._conditions.clear()
        self._refilter()

    def _refilter(self) -> None:
        # invalidate(), not invalidateRowsFilter(): under the grid (a sorting view over a source
        # that sorts itself) the latter left rejected rows in place.  Views answer the layout
        # change by fetching more rows at once; that waits until the change is over.
        self._refiltering = True
        try:
            self.invalidate()
        finally:
            self._refiltering = False

    def filterAcceptsRow(self, source_row: int, source_parent: AnyIndex) -> bool:
        if not self._conditions:
            return True
        source = self.sourceModel()
        role = Qt.ItemDataRole.UserRole
        for condition in self._conditions.values():
            if not condition.matches(source.data(source.index(source_row, condition.column), role)):
                return False
        return True

    def canFetchMore(self, parent: AnyIndex) -> bool:
        return not self._conditions and not self._refiltering and super().canFetchMore(parent)

    def fetchMore(self, parent: AnyIndex) -> None:
        # Views call fetchMore without asking canFetchMore first (on resizes and scrolls).
        if not self._conditions and not self._refiltering:
            super().fetchMore(parent)

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        source = self.sourceModel()
        if source is not None:
            source.sort(column, order)


class FilterBar(QWidget):
    """Column, operator, text and Clear, with a line saying what the filter covers.

    Signals:
        changed(): the conditions changed.
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.proxy: RowFilterProxy | None = None
        self.column = QComboBox(self)
        self.column.setObjectName("filterColumn")
        self.operator = QComboBox(self)
        self.operator.addItems(list(OPERATORS))
        self.text = QLineEdit(self)
        self.text.setObjectName("filterText")
        self.text.setPlaceholderText("Filter the loaded rows…")
        self.text.setClearButtonEnabled(True)
        self.clear_button = QPushButton("Clear filter", self)
        self.clear_button.clicked.connect(self.clear)
        self.status = QLabel("", self)
        self.status.setObjectName("filterStatus")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.column)
        layout.addWidget(self.operator)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.clear_button)
        layout.addWidget(self.status)
        self.text.textChanged.connect(self._apply)
        self.operator.currentIndexChanged.connect(self._apply)
        self.column.currentIndexChanged.connect(self._column_chosen)
        self.hide()

    def attach(self, proxy: RowFilterProxy, columns: list[str]) -> None:
        """Edit ``proxy``'s conditions (a new result: the old filter goes)."""
        self.proxy = proxy
        self.column.blockSignals(True)
        self.column.clear()
        self.column.addItems(columns)
        self.column.blockSignals(False)
        self.text.blockSignals(True)
        self.text.clear()
        self.text.blockSignals(False)
        self.hide()
        self.describe()

    def edit_column(self, column: int, operator: Operator = "contains", text: str | None = None) -> None:
        """Show the bar on ``column`` (from the grid's menu) and put the cursor in the text box."""
        self.show()
        self.column.setCurrentIndex(column)
        self.operator.setCurrentText(operator)
        if text is not None:
            self.text.setText(text)
        self._apply()
        self.text.setFocus()

    def clear(self) -> None:
        if self.proxy is not None:
            self.proxy.clear()
        self.text.blockSignals(True)
        self.text.clear()
        self.text.blockSignals(False)
        self.hide()
        self.describe()
        self.changed.emit()

    def _column_chosen(self, column: int) -> None:
        current = next((c for c in (self.proxy.conditions if self.proxy else []) if c.column == column), None)
        self.text.blockSignals(True)
        self.text.setText(current.text if current else "")
        self.text.blockSignals(False)
        if current is not None:
            self.operator.setCurrentText(current.operator)

    def _apply(self) -> None:
        if self.proxy is None or self.column.currentIndex() < 0:
            return
        operator: Operator = OPERATORS[self.operator.currentIndex()]
        self.text.setEnabled(operator in ("contains", "equals"))
        self.proxy.set_condition(Condition(self.column.currentIndex(), operator, self.text.text()))
        self.describe()
        self.changed.emit()

    def describe(self) -> str:
        """Say how many loaded rows match, and whether the result has more than is loaded."""
        proxy = self.proxy
        if proxy is None or not proxy.active:
            self.status.setText("")
            return ""
        source = proxy.sourceModel()
        loaded = source.rowCount()
        text = f"{proxy.rowCount():,} of {loaded:,} loaded row{'' if loaded == 1 else 's'} match"
        if source.canFetchMore(QModelIndex()):
            text += "; the result has more rows than are loaded (filter in SQL to search them all)"
        self.status.setText(text)
        self.status.setToolTip(text)
        return text
