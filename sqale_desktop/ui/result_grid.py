"""The result grid (DB Browser for SQLite's ``ExtendedTableWidget``): sortable, copyable, with a
context menu on cells and headers.

Its model is a ``RowFilterProxy`` over a ``ResultTableModel`` (the quick filter).  The grid knows
nothing of its menu: it says where the menu was asked for (``menu_requested``) and
``grid_menu.attach_menu`` builds it, so the menu may call the grid without the two modules
importing each other.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QGuiApplication, QHelpEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import QAbstractItemView, QStyle, QTableView, QToolTip, QWidget

from sqale_desktop.core.export_formats import TextFormat, TextLayout, column_values, format_rows
from sqale_desktop.ui.result_model import ResultTableModel, display_value
from sqale_desktop.ui.row_filter import RowFilterProxy

# Cells whose text ``fit_columns`` measures at most, and the rows it looks at (40 for a narrow
# result, as Qt's resize precision was here; 4 for a thousand columns).
FIT_SAMPLE_CELLS = 4_000
FIT_MAX_ROWS = 40
FIT_MIN_ROWS = 4


class ResultGrid(QTableView):
    """The grid: sortable, Ctrl+C copies the selected cells as TSV, a context menu on cells and headers.

    Signals:
        copied(str): the text put on the clipboard.
        menu_requested(int, QPoint): a right-click on column (-1: outside any), at a global position.
        export_requested(str): "Export whole result" chose a format (``SqlPanel.ask_export``'s).
        filter_requested(int, str, object): filter a column: (column, operator, text or None).
        clear_filter_requested(): the menu's "Clear filter".
    """

    copied = Signal(str)
    menu_requested = Signal(int, QPoint)
    export_requested = Signal(str)
    filter_requested = Signal(int, str, object)
    clear_filter_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSortingEnabled(True)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        self.horizontalHeader().setSortIndicatorShown(True)
        self.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        # A header's elide mode is ElideNone: a title wider than its section was drawn centred and
        # cut at both ends.  Its start is what a title says first; the tooltip has all of it.
        self.horizontalHeader().setTextElideMode(Qt.TextElideMode.ElideRight)
        self.horizontalHeader().viewport().installEventFilter(self)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        # A double-click on a section's edge sizes it from the first rows only (every loaded row
        # costs ~0.25 ms a row); fit_columns sizes them all when a result arrives.
        self.horizontalHeader().setResizeContentsPrecision(FIT_MAX_ROWS)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(
            lambda pos: self.menu_requested.emit(self.columnAt(pos.x()), self.viewport().mapToGlobal(pos))
        )
        header = self.horizontalHeader()
        header.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(
            lambda pos: self.menu_requested.emit(header.logicalIndexAt(pos), header.mapToGlobal(pos))
        )
        QShortcut(
            QKeySequence.StandardKey.Copy,
            self,
            self.copy_selection,
            context=Qt.ShortcutContext.WidgetShortcut,
        )

    def fit_columns(self, max_width: int = 320) -> None:
        """Size columns to their header and the first rows' text, none wider than ``max_width``.

        Measured here, not by ``resizeColumnsToContents``: Qt's asks the delegate for every cell's
        size hint, which calls ``data()`` through Python for each of its roles, and a 1,093-column
        result took 4 s to appear.  Text widths come from the font metrics of at most
        ``FIT_SAMPLE_CELLS`` cells (fewer rows the wider the result), each text measured once, and
        from the header's own hint for its margins.
        """
        model = self.result_model()
        header = self.horizontalHeader()
        if model is None or not model.columns:
            return
        columns = len(model.columns)
        rows = model.loaded_rows[: max(FIT_MIN_ROWS, min(FIT_MAX_ROWS, FIT_SAMPLE_CELLS // columns))]
        plain = self.fontMetrics()
        italic_font = QFont(self.font())
        italic_font.setItalic(True)
        italic = QFontMetrics(italic_font)
        style = self.style()
        # QStyledItemDelegate's text margins: the focus frame's, on both sides, plus one pixel.
        pad = 2 * (style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, self) + 1) + 2
        grid = 1 if self.showGrid() else 0
        # The header's hint (its style's margins and sort arrow) costs ~0.4 ms a column through
        # headerData: it is asked once, and the other columns add their title's width to its margin.
        # Measured as the hint measures it, in bold (a column with a selected cell has a bold
        # title): the plain width fell short of the hint by up to 10 px on long titles.
        names = model.columns
        bold_font = QFont(header.font())
        bold_font.setBold(True)
        titles = QFontMetrics(bold_font)
        header_pad = header.sectionSizeHint(0) - titles.size(0, names[0]).width()
        least = header.minimumSectionSize()
        widths: dict[str, int] = {}  # a text's width, measured once (columns repeat values)
        header.blockSignals(True)  # one relayout after the last section, not one per section
        try:
            for column in range(columns):
                widest = max(least, titles.size(0, names[column]).width() + header_pad)
                for row in rows:
                    value = row[column]
                    special = value is None or isinstance(value, bytes)
                    text = display_value(value)
                    key = ("\0" if special else "") + text
                    width = widths.get(key)
                    if width is None:
                        width = widths[key] = (italic if special else plain).horizontalAdvance(text)
                    widest = max(widest, width + pad + grid)
                header.resizeSection(column, min(widest, max_width))
        finally:
            header.blockSignals(False)
        self.updateGeometries()
        self.viewport().update()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """A tooltip over a header whose title may be cut: the whole column name."""
        header = self.horizontalHeader()
        if watched is header.viewport() and event.type() == QEvent.Type.ToolTip:
            assert isinstance(event, QHelpEvent)
            column = header.logicalIndexAt(event.pos())
            names = self.column_names()
            # Narrower than the header's own hint (its title in bold, the margins, the sort arrow).
            if 0 <= column < len(names) and header.sectionSize(column) < header.sectionSizeHint(column):
                QToolTip.showText(event.globalPos(), names[column], header)
            else:
                QToolTip.hideText()
            return True
        return super().eventFilter(watched, event)

    # what is shown ---------------------------------------------------------------------------
    def result_model(self) -> ResultTableModel | None:
        model = self.model()
        if isinstance(model, RowFilterProxy):
            model = model.sourceModel()
        return model if isinstance(model, ResultTableModel) else None

    def column_names(self) -> list[str]:
        model = self.result_model()
        return model.columns if model is not None else []

    def filter_active(self) -> bool:
        model = self.model()
        return isinstance(model, RowFilterProxy) and model.active

    def current_value(self, column: int) -> Any:
        """The raw value of ``column`` in the current row (the cell right-clicked)."""
        index = self.currentIndex()
        model = self.model()
        if not index.isValid() or model is None:
            return None
        return model.index(index.row(), column).data(Qt.ItemDataRole.UserRole)

    def _source_indexes(self, indexes: list[QModelIndex]) -> list[QModelIndex]:
        model = self.model()
        if isinstance(model, RowFilterProxy):
            return [model.mapToSource(i) for i in indexes]
        return indexes

    def shown_rows(self) -> list[list[Any]]:
        """Every row the grid shows (the filter's survivors among the loaded rows), in order."""
        model = self.model()
        if model is None:
            return []
        role = Qt.ItemDataRole.UserRole
        width = model.columnCount()
        return [[model.index(r, c).data(role) for c in range(width)] for r in range(model.rowCount())]

    def _put(self, text: str) -> str:
        if text:
            QGuiApplication.clipboard().setText(text)
            self.copied.emit(text)
        return text

    # copying ---------------------------------------------------------------------------------
    def copy_selection(self) -> str:
        """Ctrl+C, the menu's "Copy": the selected cells as TSV, no header row (a spreadsheet's
        copy; "Copy with headers" adds it)."""
        model = self.result_model()
        if model is None:
            return ""
        indexes = self._source_indexes(list(self.selectedIndexes()))
        return self._put(model.tsv(indexes, with_header=False))

    def copy_with_headers(self) -> str:
        """The menu's "Copy with headers": the selection as TSV under a row of column names."""
        return self.copy_as("tsv", header=True)

    def copy_as(self, fmt: TextFormat, header: bool = True) -> str:
        """The selection (or, with nothing selected, every row shown) in ``fmt``."""
        model = self.result_model()
        if model is None:
            return ""
        indexes = self._source_indexes(list(self.selectedIndexes()))
        if indexes:
            columns, rows = model.selection(indexes)
        else:
            columns, rows = model.columns, self.shown_rows()
        return self._put(format_rows(columns, rows, TextLayout(fmt, header=header)))

    def copy_column(self, column: int) -> str:
        """The values of ``column`` in every row shown, one a line."""
        model = self.model()
        if model is None or not 0 <= column < model.columnCount():
            return ""
        role = Qt.ItemDataRole.UserRole
        rows = [[model.index(r, column).data(role)] for r in range(model.rowCount())]
        return self._put(column_values(rows, 0))
