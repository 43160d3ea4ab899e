"""The query-history panel: statements the user ran by hand, newest first, searchable, to run again
or open in the editor (instead of piling up as cards in the chat).

The window stores each run with the conversation (``core.history``) and hands it here; the model
is a thin table over ``core.query_history.QueryRun`` values, the search a proxy asking each run
whether it matches.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop.core.query_history import QueryRun

AnyIndex = QModelIndex | QPersistentModelIndex
RUN_ROLE = Qt.ItemDataRole.UserRole + 1  # the QueryRun of a row
HEADERS = ("Time", "Query", "Rows", "Duration", "Database")


def _when(moment: datetime, now: datetime | None = None) -> str:
    local = moment.astimezone()
    today = (now or datetime.now().astimezone()).date()
    return local.strftime("%H:%M:%S") if local.date() == today else local.strftime("%Y-%m-%d %H:%M")


def _one_line(sql: str, limit: int = 160) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class QueryHistoryModel(QAbstractTableModel):
    """Runs, newest first."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runs: list[QueryRun] = []

    @property
    def runs(self) -> list[QueryRun]:
        return list(self._runs)

    def set_runs(self, runs: list[QueryRun]) -> None:
        """Replace the list (``runs`` oldest first, as the history stores them)."""
        self.beginResetModel()
        self._runs = list(reversed(runs))
        self.endResetModel()

    def add_run(self, run: QueryRun) -> None:
        self.beginInsertRows(QModelIndex(), 0, 0)
        self._runs.insert(0, run)
        self.endInsertRows()

    def clear(self) -> None:
        self.set_runs([])

    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._runs)

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(HEADERS)

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._runs):
            return None
        run = self._runs[index.row()]
        column = index.column()
        if role == RUN_ROLE:
            return run
        if role == Qt.ItemDataRole.DisplayRole:
            if column == 0:
                return _when(run.ran_at)
            if column == 1:
                return _one_line(run.sql)
            if column == 2:
                return "⚠ error" if run.error and not run.cancelled else run.status
            if column == 3:
                return "" if run.duration_ms is None else f"{run.duration_ms:,} ms"
            if column == 4:
                return run.database
            return None
        if role == Qt.ItemDataRole.ToolTipRole:
            if column == 1:
                return run.sql[:4000]
            if column == 2 and run.error:
                return run.error
            if column == 0:
                return run.ran_at.astimezone().isoformat(sep=" ", timespec="seconds")
            return None
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (2, 3):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return HEADERS[section] if 0 <= section < len(HEADERS) else None
        return None

    def flags(self, index: AnyIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable


class _Search(QSortFilterProxyModel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.text = ""

    def set_text(self, text: str) -> None:
        self.text = text
        self.invalidate()

    def filterAcceptsRow(self, source_row: int, source_parent: AnyIndex) -> bool:
        if not self.text.strip():
            return True
        run = self.sourceModel().index(source_row, 0, source_parent).data(RUN_ROLE)
        return isinstance(run, QueryRun) and run.matches(self.text)


class QueryHistoryPanel(QWidget):
    """The search box, the list of runs, and Run again / Open in editor (double-click opens).

    Signals:
        rerun_requested(str): run this SQL again.
        open_requested(str): put this SQL in the editor.
    """

    rerun_requested = Signal(str)
    open_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = QueryHistoryModel(self)
        self.proxy = _Search(self)
        self.proxy.setSourceModel(self.model)
        self.search = QLineEdit(self)
        self.search.setObjectName("historySearch")
        self.search.setPlaceholderText("Search the queries you ran…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.proxy.set_text)
        self.view = QTableView(self)
        self.view.setModel(self.proxy)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setWordWrap(False)
        self.view.verticalHeader().hide()
        self.view.setTextElideMode(Qt.TextElideMode.ElideRight)
        header = self.view.horizontalHeader()
        for column in range(len(HEADERS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.view.doubleClicked.connect(lambda _index: self.open_selected())
        self.rerun_button = QPushButton("Run again", self)
        self.rerun_button.clicked.connect(self.rerun_selected)
        self.open_button = QPushButton("Open in editor", self)
        self.open_button.clicked.connect(self.open_selected)
        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.open_button)
        top.addWidget(self.rerun_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.view, 1)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._enable())
        self.proxy.modelReset.connect(self._enable)
        self.proxy.layoutChanged.connect(self._enable)
        self._enable()

    def add_run(self, run: QueryRun) -> None:
        self.model.add_run(run)

    def set_runs(self, runs: list[QueryRun]) -> None:
        self.model.set_runs(runs)

    def shown_runs(self) -> list[QueryRun]:
        return [self.proxy.index(r, 0).data(RUN_ROLE) for r in range(self.proxy.rowCount())]

    def select_row(self, row: int) -> None:
        self.view.selectRow(row)

    def selected_run(self) -> QueryRun | None:
        rows = self.view.selectionModel().selectedRows()
        if not rows:
            return None
        run = rows[0].data(RUN_ROLE)
        return run if isinstance(run, QueryRun) else None

    def rerun_selected(self) -> None:
        run = self.selected_run()
        if run is not None:
            self.rerun_requested.emit(run.sql)

    def open_selected(self) -> None:
        run = self.selected_run()
        if run is not None:
            self.open_requested.emit(run.sql)

    def _enable(self) -> None:
        chosen = self.selected_run() is not None
        self.rerun_button.setEnabled(chosen)
        self.open_button.setEnabled(chosen)
