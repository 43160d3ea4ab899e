"""The result grid's model: a thin Qt adapter over the core's paged query cursor.

Rows arrive 500 at a time through ``canFetchMore``/``fetchMore`` (Spyder's pattern), so a
ten-million-row result costs only the pages the user scrolled to.  ``data()`` formats for the
display role only; the raw value stays available under ``Qt.UserRole`` for copying and export.

Sorting (decided here, the issue leaves it open): when every row is loaded the model sorts them in
memory, in SQLite's own order of types (NULL, numbers, text, BLOB); when more rows remain it asks
its owner to re-run the query with ``ORDER BY`` (``resort_requested``), because sorting only the
loaded page would show a wrong first row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont

from sqale_desktop.core.db.render import render_cell
from sqale_desktop.core.export_formats import TextLayout, cell_text, format_rows

PAGE_SIZE = 500
ELIDE_AT = 200

AnyIndex = QModelIndex | QPersistentModelIndex


class PagedCursor(Protocol):
    """What the model needs from ``core.db``'s QueryCursor."""

    @property
    def columns(self) -> list[str]: ...

    @property
    def exhausted(self) -> bool: ...

    def fetch_page(self, n: int) -> Sequence[Sequence[Any]]: ...


def display_value(value: Any) -> str:
    """How a cell reads in the grid: core.db.render's display form (``<blob 3 bytes>``, long text
    cut, floats to 15 significant digits), kept on one line.  Display only: copying and export
    never use it."""
    return render_cell(value, max_chars=ELIDE_AT).replace("\n", " ⏎ ")


def tsv_value(value: Any) -> str:
    """How a cell is copied: ``core.export_formats.cell_text``, the export rule (NULL an empty
    field, a BLOB ``X'01FF'``), the same as the file export and ``sqale-desktop query --format``."""
    return cell_text(value)


def _sqlite_order_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, 0)
    if isinstance(value, int | float):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, bytes(value))


class ReadOnlyTableModel(QAbstractTableModel):
    """A read-only table of named columns, its rows numbered from 1: what the result grid and a
    tool card's rows share, so a value looks the same in both (NULL and BLOB grey and italic,
    numbers right-aligned)."""

    def __init__(self, columns: Sequence[str], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._columns = [str(c) for c in columns]
        self._grey = QBrush(QColor("#8a8a8a"))
        self._italic = QFont()
        self._italic.setItalic(True)

    @property
    def columns(self) -> list[str]:
        """The column names, in order (a copy)."""
        return list(self._columns)

    def cell_look(self, role: int, special: bool, number: bool) -> Any:
        """A cell's answer for the style roles: ``special`` (a NULL or a BLOB) grey and italic,
        a ``number`` right-aligned; None for any other role or cell."""
        if role == Qt.ItemDataRole.ForegroundRole and special:
            return self._grey
        if role == Qt.ItemDataRole.FontRole and special:
            return self._italic
        if role == Qt.ItemDataRole.TextAlignmentRole and number:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._columns)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            return self._columns[section] if 0 <= section < len(self._columns) else None
        return str(section + 1)

    def flags(self, index: AnyIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable


class ResultTableModel(ReadOnlyTableModel):
    """Rows of one query, loaded page by page from a cursor.

    Signals:
        resort_requested(int, object): sort by column (Qt.SortOrder) over the whole result, which
            needs the query re-run because not every row is loaded yet.
        rows_loaded(int): the number of rows loaded so far, after each page.
    """

    resort_requested = Signal(int, object)
    rows_loaded = Signal(int)

    def __init__(
        self,
        cursor: PagedCursor | None = None,
        first_rows: Sequence[Sequence[Any]] = (),
        parent: QObject | None = None,
        columns: Sequence[str] | None = None,
        sorted_by: tuple[int, Qt.SortOrder] | None = None,
    ) -> None:
        if columns is None:
            columns = cursor.columns if cursor is not None else []
        super().__init__(columns, parent)
        self.sorted_by = sorted_by  # the order the rows already come in (a re-run with ORDER BY)
        self._cursor = cursor
        self._rows: list[Sequence[Any]] = list(first_rows)

    # Qt's model API -------------------------------------------------------------------------
    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self._rows) or index.column() >= len(self._columns):
            return None
        value = self._rows[index.row()][index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return display_value(value)
        if role == Qt.ItemDataRole.UserRole:
            return value
        if role == Qt.ItemDataRole.ToolTipRole:
            if isinstance(value, str) and len(value) > ELIDE_AT:
                return value[:4000]
            if isinstance(value, float) and display_value(value) != repr(value):
                return f"Stored value: {value!r}"  # the cell shows it to 15 significant digits
            return None
        special = value is None or isinstance(value, bytes | bytearray | memoryview)
        return self.cell_look(role, special, isinstance(value, int | float))

    def canFetchMore(self, parent: AnyIndex = QModelIndex()) -> bool:  # noqa: B008
        if parent.isValid() or self._cursor is None:
            return False
        return not self._cursor.exhausted

    def fetchMore(self, parent: AnyIndex = QModelIndex()) -> None:  # noqa: B008
        if not self.canFetchMore(parent):
            return
        assert self._cursor is not None
        page = list(self._cursor.fetch_page(PAGE_SIZE))
        if page:
            start = len(self._rows)
            self.beginInsertRows(QModelIndex(), start, start + len(page) - 1)
            self._rows.extend(page)
            self.endInsertRows()
        self.rows_loaded.emit(len(self._rows))

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        if not 0 <= column < len(self._columns) or (column, order) == self.sorted_by:
            return
        if self.canFetchMore():
            self.resort_requested.emit(column, order)
            return
        self.layoutAboutToBeChanged.emit()
        self._rows.sort(
            key=lambda row: _sqlite_order_key(row[column]), reverse=order == Qt.SortOrder.DescendingOrder
        )
        self.sorted_by = (column, order)
        self.layoutChanged.emit()

    # For the window -------------------------------------------------------------------------
    @property
    def loaded_rows(self) -> list[Sequence[Any]]:
        return self._rows

    @property
    def complete(self) -> bool:
        return not self.canFetchMore()

    def close_cursor(self) -> None:
        """Finish the statement early; the rows loaded so far stay."""
        close = getattr(self._cursor, "close", None)
        if callable(close):
            close()

    @property
    def truncated(self) -> bool:
        """The cursor stopped at its row cap (more rows exist than the grid will hold)."""
        return bool(getattr(self._cursor, "truncated", False))

    def selection(self, indexes: Sequence[QModelIndex]) -> tuple[list[str], list[list[Any]]]:
        """The selected cells as (column names, rows): the rectangle spanning the selection, in the
        model's row order, unselected cells inside it as NULL."""
        rows = sorted({i.row() for i in indexes})
        cols = sorted({i.column() for i in indexes})
        chosen = {(i.row(), i.column()) for i in indexes}
        values = [[self._rows[r][c] if (r, c) in chosen else None for c in cols] for r in rows]
        return [self._columns[c] for c in cols], values

    def tsv(self, indexes: Sequence[QModelIndex], with_header: bool = False) -> str:
        """The selected cells as TSV (a rectangle spanning the selection; unselected cells empty).

        Rows end with the platform's line ending; cells with tabs, quotes or line breaks are quoted.
        """
        if not indexes:
            return ""
        columns, rows = self.selection(indexes)
        return format_rows(columns, rows, TextLayout("tsv", header=with_header))
