"""The schema tree of one database: tables and views, their columns with types and keys, row counts.

The schema is read on the pool; row counts follow one table at a time on the pool too (a count of a
big table can take seconds), each filling in its table's label when it arrives.  The model is a
QStandardItemModel: well kept, and it passes qtmodeltester as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QAbstractItemView, QTreeView, QWidget

from sqale_desktop.core.db.introspect import Schema, TableInfo

TABLE_ROLE = Qt.ItemDataRole.UserRole + 1  # the table's name, on table items
KIND_ROLE = Qt.ItemDataRole.UserRole + 2  # "table", "view", "virtual", "column"


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


class SchemaModel(QStandardItemModel):
    """Tables (and views) at the top level, their columns below."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setHorizontalHeaderLabels(["Schema"])
        self._items: dict[str, QStandardItem] = {}
        self._tables: dict[str, TableInfo] = {}
        self._counts: dict[str, str] = {}

    def set_schema(self, schema: Schema) -> None:
        self.removeRows(0, self.rowCount())
        self._items.clear()
        self._tables.clear()
        self._counts.clear()
        for table in schema.visible():
            item = QStandardItem()
            item.setEditable(False)
            item.setData(table.name, TABLE_ROLE)
            item.setData(table.kind, KIND_ROLE)
            if table.sql:
                item.setToolTip(table.sql[:2000])
            self._items[table.name] = item
            self._tables[table.name] = table
            self._relabel(table.name)
            for index in range(len(table.columns)):
                if table.columns[index].hidden:
                    continue
                child = QStandardItem(_column_label(table, index))
                child.setEditable(False)
                child.setData(table.columns[index].name, TABLE_ROLE)
                child.setData("column", KIND_ROLE)
                item.appendRow(child)
            if table.error:
                child = QStandardItem(f"⚠ {table.error}")
                child.setEditable(False)
                child.setData("error", KIND_ROLE)
                item.appendRow(child)
            self.appendRow(item)

    def tables(self) -> list[str]:
        return list(self._items)

    def countable_tables(self) -> list[str]:
        """Tables (not views or broken virtual tables) whose rows can be counted."""
        return [name for name, t in self._tables.items() if t.kind == "table" and not t.error]

    def set_row_count(self, table: str, count: int | str) -> None:
        if isinstance(count, int):
            self._counts[table] = f"{count:,} row" + ("" if count == 1 else "s")
        else:
            self._counts[table] = count
        self._relabel(table)

    def row_count_text(self, table: str) -> str | None:
        return self._counts.get(table)

    def _relabel(self, name: str) -> None:
        item = self._items.get(name)
        table = self._tables.get(name)
        if item is None or table is None:
            return
        kind = "" if table.kind == "table" else f"  ({table.kind})"
        count = self._counts.get(name)
        item.setText(f"{name}{kind}" + (f"  — {count}" if count else ""))


class SchemaTree(QTreeView):
    """The tree view; double-clicking a table asks for a quick look at its rows.

    Signals:
        table_activated(str): a table or view was double-clicked.
    """

    table_activated = Signal(str)

    def __init__(self, model: SchemaModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setModel(model)
        self.setHeaderHidden(True)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setUniformRowHeights(True)
        self.doubleClicked.connect(self._activated)

    def _activated(self, index: QModelIndex) -> None:
        if index.data(KIND_ROLE) in ("table", "view", "virtual"):
            self.table_activated.emit(str(index.data(TABLE_ROLE)))


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
