"""The schema browser of one database: a filter box over the tables and views, their columns with
types and keys, and row counts.

The schema is read on the pool; row counts follow one table at a time on the pool too (a count of a
big table can take seconds), each filling in its table's "Rows" cell when it arrives.

- Order: tables and views sorted naturally and case-insensitively (``table2`` before ``table10``)
  with natsort, the maintained library for exactly this; columns keep their declared order, which
  means something (keys first, as the author wrote them).
- Filter: a table shows when its name or one of its columns contains the typed text (any case); its
  columns show when the table's name matched (all of them) or when they match themselves.  Tables
  are filtered by a QSortFilterProxyModel on a search text (the name and the column names) as a
  fixed string, in Qt's C++ rather than a Python call per row, and only when the set of tables
  shown changes.  Columns are hidden in the view (``setRowHidden``), and only under expanded tables:
  refiltering the columns of 5,000 tables in the proxy cost ~100 ms on a keystroke that changed
  only which columns matched.  ``benchmarks/ui.py`` measures keystrokes on 5,000 tables.
- Width: a name that does not fit keeps its end (``…Backward_DistributionEvents``), where sorted
  names differ, and names in sight that would still read the same get a window where they part:
  ``core.name_elision`` (a middle elision turned six names of the iOS power log into the same
  ``PLAccountin…nts_Dynamic``, and the columns of a real ISTAT file into ``Codice Comun…INTEGER``
  once their type and foreign key followed them).  Tables and columns in sight are told apart
  together; a column's type and keys give way before its name, a view's "(view)" stays.  Every
  name has a tooltip with the whole of it, and the row count is a column of its own sized to its
  contents, so it stays visible however narrow the pane gets.

The model is a QStandardItemModel: well kept, and it passes qtmodeltester as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from natsort import natsort_keygen, ns
from PySide6.QtCore import (
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QKeyEvent,
    QKeySequence,
    QPaintEvent,
    QShortcut,
    QStandardItem,
    QStandardItemModel,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop.core.db.identifiers import quote_identifier
from sqale_desktop.core.db.introspect import Schema, TableInfo
from sqale_desktop.core.name_elision import Label, shown_labels

TABLE_ROLE = Qt.ItemDataRole.UserRole + 1  # the table's name on table items, the column's on columns
KIND_ROLE = Qt.ItemDataRole.UserRole + 2  # "table", "view", "virtual", "column", "error"
SEARCH_ROLE = Qt.ItemDataRole.UserRole + 3  # what the filter box matches (see the module docstring)

TABLE_KINDS = ("table", "view", "virtual")
AUTO_EXPAND_AT_MOST = 25
"""A filter that leaves this few tables expands those found through their columns, so the matching
columns are in sight (a table found by its name stays collapsed: its name is the match)."""

_natural = natsort_keygen(alg=ns.IGNORECASE)


def _column_label(table: TableInfo, index: int) -> str:
    column = table.columns[index]
    parts = [column.name, column.type or "(no type)"]
    keys = []
    if column.pk:
        keys.append("PK")
    for fk in table.foreign_keys:
        if column.name in fk.columns:
            position = fk.columns.index(column.name)
            target = fk.ref_columns[position] if position < len(fk.ref_columns) else None
            keys.append(f"FK → {fk.ref_table}" + (f".{target}" if target else ""))
    if column.notnull and not column.pk:
        keys.append("NOT NULL")
    label = f"{parts[0]}  {parts[1]}"
    return label + ("  [" + ", ".join(keys) + "]" if keys else "")


def _column_tip(label: str, original: str | None) -> str:
    """A column's tooltip: its label, and for an imported column that had to be renamed the name
    it has in its file (also in the table's CREATE statement and the ``_columns`` note)."""
    if original is None:
        return label
    shown = f"“{original}”" if original.strip() else "(no name)"
    return f"{label}\n\nIn the imported file: {shown}"


def select_statement(table: str, limit: int = 100) -> str:
    """The statement "Copy SELECT" puts on the clipboard (always-correct quoting)."""
    return f"SELECT * FROM {quote_identifier(table)} LIMIT {limit}"


_Row = tuple[tuple[int, int], str, str, bool, int]
"""A row in sight: (its row and its parent's, its name, what follows the name, whether that stays,
its width)."""


class NameDelegate(QStyledItemDelegate):
    """Draws the rows in sight (tables and columns) shortened by ``core.name_elision``, so that no
    two names read alike (that module says how); other rows as the view elides them.

    The texts are worked out once for the rows in sight, their widths and the font (the rows once
    per paint of the tree: every row painted asks), so painting stays cheap with 5,000 tables.
    """

    def __init__(self, tree: SchemaTree) -> None:
        super().__init__(tree)
        self._tree = tree
        self._sight: tuple[tuple[int, ...], tuple[_Row, ...]] | None = None
        self._texts: tuple[tuple[Any, ...], dict[tuple[int, int], str]] | None = None

    def forget_sight(self) -> None:
        """Work out the rows in sight again at the next row drawn (the tree's paint calls this:
        expanding, filtering or hiding rows changes them without moving the scroll bar)."""
        self._sight = None

    def _in_sight(self) -> tuple[_Row, ...]:
        """The named rows in the viewport, top to bottom, by the view's own walk (hidden rows
        skipped), with their widths."""
        tree = self._tree
        top = tree.indexAt(QPoint(0, 0)).siblingAtColumn(0)
        bottom = tree.viewport().height()
        last = tree.indexAt(QPoint(0, bottom - 1))
        key = (
            tree.verticalScrollBar().value(),
            bottom,
            tree.viewport().width(),
            tree.proxy.rowCount(),
            top.row(),
            top.parent().row(),
            last.row(),
            last.parent().row(),
        )
        if self._sight is not None and self._sight[0] == key:
            return self._sight[1]
        rows = []
        index = top
        while index.isValid() and tree.visualRect(index).top() <= bottom:
            label = _label(index, str(index.data()))
            if label is not None:
                rows.append(((index.row(), index.parent().row()), *label, tree.visualRect(index).width()))
            index = tree.indexBelow(index)
        self._sight = key, tuple(rows)
        return self._sight[1]

    def initStyleOption(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        super().initStyleOption(option, index)
        label = _label(index, option.text)
        if label is None:
            return
        widget = option.widget
        style = widget.style() if widget is not None else QApplication.style()
        rect = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, option, widget)
        # The style draws the text inside a margin on both sides of that rectangle.
        margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, widget) + 1
        room = rect.width() - 2 * margin
        if room <= 0:
            return
        chrome = option.rect.width() - room  # the same on every row of the column: no icons
        where = (index.row(), index.parent().row())
        sight = self._in_sight()
        if not any(row[0] == where for row in sight):
            sight = ((where, *label, option.rect.width()),)
        key = (option.font.key(), chrome, sight)
        if self._texts is None or self._texts[0] != key:
            labels = [Label(name, width - chrome, note, stays) for _where, name, note, stays, width in sight]
            texts = shown_labels(labels, option.fontMetrics.horizontalAdvance)
            self._texts = key, {row[0]: text for row, text in zip(sight, texts, strict=True)}
        option.text = self._texts[1][where]


def _label(index: QModelIndex | QPersistentModelIndex, text: str) -> tuple[str, str, bool] | None:
    """A table's or column's row as (name, what follows it, whether that stays): a view's
    "(view)" stays, a column's type and keys give way first.  None for other rows."""
    name, kind = index.data(TABLE_ROLE), index.data(KIND_ROLE)
    if kind not in (*TABLE_KINDS, "column") or not isinstance(name, str) or not text.startswith(name):
        return None
    return name, text[len(name) :], kind != "column"


_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
_READ_ONLY = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
# Building 25,000 items for 5,000 tables is most of opening such a file: each item gets the fewest
# calls into Qt that do the job (flags set once, not setEditable; no count cells on columns).


def _item(text: str, search: str, name: str, kind: str) -> QStandardItem:
    item = QStandardItem(text)
    item.setFlags(_READ_ONLY)
    item.setData(name, TABLE_ROLE)
    item.setData(kind, KIND_ROLE)
    item.setData(search, SEARCH_ROLE)
    return item


def _count_item(search: str) -> QStandardItem:
    item = QStandardItem("")
    item.setFlags(_READ_ONLY)
    item.setData(search, SEARCH_ROLE)
    item.setTextAlignment(_RIGHT)
    return item


class SchemaModel(QStandardItemModel):
    """Tables (and views) at the top level, naturally sorted; their columns below.

    Column 0 holds the names, column 1 the row counts of tables.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setHorizontalHeaderLabels(["Table", "Rows"])
        self._items: dict[str, QStandardItem] = {}
        self._count_items: dict[str, QStandardItem] = {}
        self._tables: dict[str, TableInfo] = {}
        self._counts: dict[str, str] = {}
        self.search_texts: list[tuple[str, list[str]]] = []
        """Per table (in order) its name and its children's column names, case-folded; "\n" for a
        child without a name of its own (an error line), which no typed text contains."""

    def set_schema(self, schema: Schema) -> None:
        self.removeRows(0, self.rowCount())
        self._items.clear()
        self._count_items.clear()
        self._tables.clear()
        self._counts.clear()
        self.search_texts = []
        rows = []
        for table in sorted(schema.visible(), key=lambda t: _natural(t.name)):
            visible = [i for i in range(len(table.columns)) if not table.columns[i].hidden]
            search = "\n".join([table.name, *(table.columns[i].name for i in visible)])
            item = _item("", search, table.name, table.kind)
            tip = table.name if not table.sql else f"{table.name}\n\n{table.sql[:2000]}"
            item.setToolTip(tip)
            count = _count_item(search)
            self._items[table.name] = item
            self._count_items[table.name] = count
            self._tables[table.name] = table
            self._relabel(table.name)
            for index in visible:
                column = table.columns[index]
                label = _column_label(table, index)
                child = _item(label, search, column.name, "column")  # shown with its table
                child.setToolTip(_column_tip(label, column.original))
                item.appendRow(child)
            if table.error:
                error = _item(f"⚠ {table.error}", search, table.name, "error")
                error.setToolTip(table.error)
                item.appendRow(error)
            rows.append([item, count])
            children = [table.columns[i].name.casefold() for i in visible]
            self.search_texts.append((table.name.casefold(), children + ["\n"] * bool(table.error)))
        for row in rows:
            self.appendRow(row)

    def matches(self, text: str) -> list[int | tuple[int, tuple[int, ...]]]:
        """What the filter ``text`` leaves, as the proxy will: a table found by its name as its row
        (with all its children), one found through columns as (row, those children's rows).

        One Python pass (a millisecond or two on 5,000 tables), so that a keystroke that changes
        nothing shown skips Qt's refiltering; an empty ``text`` leaves everything.
        """
        needle = text.casefold()
        shown: list[int | tuple[int, tuple[int, ...]]] = []
        for row, (name, children) in enumerate(self.search_texts):
            if needle in name:
                shown.append(row)
                continue
            hits = tuple(i for i, child in enumerate(children) if needle in child)
            if hits:
                shown.append((row, hits))
        return shown

    def tables(self) -> list[str]:
        """Table and view names in the order shown."""
        return list(self._items)

    def table(self, name: str) -> TableInfo | None:
        return self._tables.get(name)

    def countable_tables(self) -> list[str]:
        """Tables (not views or broken virtual tables) whose rows can be counted."""
        return [name for name, t in self._tables.items() if t.kind == "table" and not t.error]

    def set_row_count(self, table: str, count: int | str) -> None:
        cell = self._count_items.get(table)
        if isinstance(count, int):
            self._counts[table] = f"{count:,} row" + ("" if count == 1 else "s")
            if cell is not None:
                cell.setText(f"{count:,}")
                cell.setToolTip(self._counts[table])
        else:
            self._counts[table] = count
            if cell is not None:
                cell.setText("?")
                cell.setToolTip(count)

    def row_count_text(self, table: str) -> str | None:
        return self._counts.get(table)

    def suffix(self, name: str) -> str:
        """What follows a table's name in its row: "  (view)", "  (virtual)", or nothing."""
        table = self._tables.get(name)
        return "" if table is None or table.kind == "table" else f"  ({table.kind})"

    def _relabel(self, name: str) -> None:
        item = self._items.get(name)
        table = self._tables.get(name)
        if item is None or table is None:
            return
        item.setText(f"{name}{self.suffix(name)}")


class SchemaFilter(QSortFilterProxyModel):
    """The filter box's proxy: a fixed, case-insensitive match on ``SEARCH_ROLE`` (in C++)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFilterRole(SEARCH_ROLE)
        self.setFilterKeyColumn(0)
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        # Children are matched on their own search text (see the module docstring), not promoted.
        self.setRecursiveFilteringEnabled(False)


class SchemaTree(QTreeView):
    """The tree view, with a context menu on tables and views.

    Signals:
        table_activated(str): a table or view was double-clicked, or "Preview rows" chosen.
        copy_requested(str): text to put on the clipboard ("Copy name", "Copy SELECT").
    """

    table_activated = Signal(str)
    copy_requested = Signal(str)

    def __init__(self, model: SchemaModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.schema_model = model
        self.proxy = SchemaFilter(self)
        self.proxy.setSourceModel(model)
        self.setModel(self.proxy)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setUniformRowHeights(True)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.names = NameDelegate(self)
        self.setItemDelegateForColumn(0, self.names)
        header = self.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._context_menu)
        self.doubleClicked.connect(self._activated)
        self.create_dialog: QDialog | None = None

    def paintEvent(self, event: QPaintEvent) -> None:
        self.names.forget_sight()
        super().paintEvent(event)

    def table_at(self, index: QModelIndex) -> str | None:
        """The table or view an index of the view belongs to (a column's parent table)."""
        if not index.isValid():
            return None
        first = index.siblingAtColumn(0)
        if first.data(KIND_ROLE) in TABLE_KINDS:
            return str(first.data(TABLE_ROLE))
        parent = first.parent()
        if parent.isValid() and parent.data(KIND_ROLE) in TABLE_KINDS:
            return str(parent.data(TABLE_ROLE))
        return None

    def _activated(self, index: QModelIndex) -> None:
        if index.siblingAtColumn(0).data(KIND_ROLE) in TABLE_KINDS:
            self.table_activated.emit(str(index.siblingAtColumn(0).data(TABLE_ROLE)))

    def menu_for(self, index: QModelIndex) -> QMenu | None:
        """The context menu of a table, view or column row (None elsewhere)."""
        table = self.table_at(index)
        if table is None:
            return None
        menu = QMenu(self)
        menu.addAction("Preview rows", lambda: self.table_activated.emit(table))
        menu.addSeparator()
        menu.addAction("Copy name", lambda: self.copy_requested.emit(table))
        menu.addAction("Copy SELECT * … LIMIT 100", lambda: self.copy_requested.emit(select_statement(table)))
        show = menu.addAction("Show CREATE statement", lambda: self.show_create(table))
        info = self.schema_model.table(table)
        show.setEnabled(bool(info is not None and info.sql))
        return menu

    def _context_menu(self, position: QPoint) -> None:
        menu = self.menu_for(self.indexAt(position))
        if menu is not None:
            menu.exec(self.viewport().mapToGlobal(position))
            menu.deleteLater()

    def show_create(self, table: str) -> QDialog | None:
        """A non-modal window with the table's CREATE statement, highlighted and copyable."""
        from sqale_desktop.ui.sql_editor import SqlEditor
        from sqale_desktop.ui.sql_highlight import format_sql

        info = self.schema_model.table(table)
        if info is None or not info.sql:
            return None
        dialog = QDialog(self)
        dialog.setWindowTitle(f"CREATE statement of {table}")
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        layout = QVBoxLayout(dialog)
        editor = SqlEditor(dialog, read_only=True)
        editor.setObjectName("createStatement")
        editor.set_sql(format_sql(info.sql))
        layout.addWidget(editor)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, dialog)
        copy = buttons.addButton("Copy", QDialogButtonBox.ButtonRole.ActionRole)
        copy.clicked.connect(lambda: self.copy_requested.emit(info.sql or ""))
        buttons.rejected.connect(dialog.close)
        layout.addWidget(buttons)
        dialog.resize(640, 420)
        dialog.show()
        self.create_dialog = dialog
        return dialog


class FilterBox(QLineEdit):
    """A line edit where Esc clears the text; an empty box lets Esc through (Stop, in the window)."""

    def event(self, event: QEvent) -> bool:
        if (
            event.type() == QEvent.Type.ShortcutOverride
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Escape
            and self.text()
        ):
            event.accept()  # the key press comes to this box instead of the window's shortcut
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape and self.text():
            self.clear()
            event.accept()
            return
        super().keyPressEvent(event)


class SchemaBrowser(QWidget):
    """The filter box over the tree, and a line saying how many tables the filter left.

    Ctrl+F anywhere in the browser puts the cursor in the filter box; Esc there clears it.
    """

    def __init__(self, model: SchemaModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self._shown: list[int] | None = None  # the tables the proxy's filter leaves (None: all)
        self._hits: dict[int, tuple[int, ...]] = {}  # table row -> its matching columns' rows
        self._filtered = False
        self.tree = SchemaTree(model, self)
        self._expanded: set[int] = set()  # source rows of the tables the user expanded
        self._auto: set[int] = set()  # source rows the filter expanded (collapsed when it moves on)
        self.tree.expanded.connect(self._table_expanded)
        self.tree.collapsed.connect(lambda index: self._expanded.discard(self._source_row(index)))
        model.modelReset.connect(self._forget_shown)
        model.rowsInserted.connect(self._forget_shown)
        model.rowsRemoved.connect(self._forget_shown)
        self.filter_box = FilterBox(self)
        self.filter_box.setObjectName("schemaFilter")
        self.filter_box.setPlaceholderText("Filter tables and columns (Ctrl+F)")
        self.filter_box.setClearButtonEnabled(True)
        self.filter_box.textChanged.connect(self.set_filter)
        self.status = QLabel("", self)
        self.status.setObjectName("schemaFilterStatus")
        self.status.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.filter_box)
        layout.addWidget(self.status)
        layout.addWidget(self.tree, 1)
        QShortcut(
            QKeySequence.StandardKey.Find,
            self,
            self.focus_filter,
            context=Qt.ShortcutContext.WidgetWithChildrenShortcut,
        )

    def _forget_shown(self) -> None:
        self._shown = None
        self._hits = {}
        self._expanded.clear()
        self._auto.clear()
        self.tree.proxy.setFilterFixedString("")
        if self.filter_box.text():
            self.set_filter(self.filter_box.text())

    def focus_filter(self) -> None:
        self.filter_box.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.filter_box.selectAll()

    def set_filter(self, text: str) -> None:
        """Show the tables whose names or columns contain ``text`` (any case)."""
        proxy = self.tree.proxy
        matches = self.model.matches(text)
        tables = [m if isinstance(m, int) else m[0] for m in matches]
        self._hits = {m[0]: m[1] for m in matches if not isinstance(m, int)}
        before = self._shown if self._shown is not None else list(range(self.model.rowCount()))
        if tables != before:
            # Refiltering 5,000 rows costs Qt tens of milliseconds even when nothing changes
            # ("r", then "re"): only do it when the tables shown change.
            proxy.setFilterFixedString(text)
            self._shown = tables
        for source_row in self._expanded:
            index = proxy.mapFromSource(self.model.index(source_row, 0))
            if index.isValid():
                self._hide_columns(index)
        shown = proxy.rowCount()
        if not text:
            self.status.hide()
            if self._filtered:
                self.tree.collapseAll()
                self._expanded.clear()
                self._auto.clear()
            self._filtered = False
            return
        self._filtered = True
        total = self.model.rowCount()
        self.status.setText(
            f"{shown:,} of {total:,} tables and views" if shown else "No table or column matches"
        )
        self.status.show()
        wanted = set(self._hits) if shown <= AUTO_EXPAND_AT_MOST else set()
        for source_row in self._auto - wanted:
            self.tree.collapse(proxy.mapFromSource(self.model.index(source_row, 0)))
        for source_row in sorted(wanted - self._auto):
            self.tree.expand(proxy.mapFromSource(self.model.index(source_row, 0)))
        self._auto = wanted

    def _source_row(self, index: QModelIndex) -> int:
        return self.tree.proxy.mapToSource(index).row()

    def _table_expanded(self, index: QModelIndex) -> None:
        self._expanded.add(self._source_row(index))
        self._hide_columns(index)

    def _hide_columns(self, index: QModelIndex) -> None:
        """Under an expanded table, show only the columns the filter matched (all when its name
        matched, or without a filter)."""
        source = self.tree.proxy.mapToSource(index)
        hits = self._hits.get(source.row()) if self.filter_box.text() else None
        for row in range(self.tree.proxy.rowCount(index)):
            self.tree.setRowHidden(row, index, hits is not None and row not in hits)

    def visible_columns(self, table: str) -> list[str]:
        """The column rows shown under ``table`` (for tests and the status line)."""
        proxy = self.tree.proxy
        for row in range(proxy.rowCount()):
            index = proxy.index(row, 0)
            if index.data(TABLE_ROLE) == table:
                self._hide_columns(index)
                return [
                    str(proxy.index(r, 0, index).data(TABLE_ROLE))
                    for r in range(proxy.rowCount(index))
                    if not self.tree.isRowHidden(r, index)
                ]
        return []

    def visible_tables(self) -> list[str]:
        proxy = self.tree.proxy
        return [str(proxy.index(row, 0).data(TABLE_ROLE)) for row in range(proxy.rowCount())]


def count_rows_job(db: Any, tables: list[str]) -> Callable[[Any], None]:
    """A pool job counting the rows of each table in turn; each count arrives as progress
    ``(table, count or message)`` on the UI thread.  Stops when cancelled."""
    from sqale_desktop.core.db.errors import DatabaseError
    from sqale_desktop.core.db.introspect import row_count

    def job(ctx: Any) -> None:
        ctx.on_cancel(db.interrupt)
        for table in tables:
            if ctx.cancelled:
                return
            try:
                ctx.progress((table, row_count(db, table)))
            except DatabaseError as exc:
                if ctx.cancelled:
                    return
                ctx.progress((table, f"count failed: {exc}"))

    return job
