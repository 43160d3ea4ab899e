"""The result grid's context menu (on cells and on column headers).

Copy, copy with headers, copy as CSV / TSV / JSON / Markdown, a column's values, the quick filter,
exporting the whole result (the query re-run to the end on the pool, not just the loaded pages),
and, with a quick filter on, exporting the rows the filter shows.  The menu only emits what the
grid and the panel already offer as methods, so every action is also reachable (and tested)
without opening a menu.  The grid does not import this module: it emits ``menu_requested`` and
``attach_menu`` answers it.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPoint
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QMenu

from sqale_desktop.core.export_formats import FORMAT_NAMES, TEXT_FORMATS, TextFormat, cell_text
from sqale_desktop.ui.result_grid import ResultGrid

EXPORT_CHOICES: tuple[tuple[str, str], ...] = (
    ("csv", "CSV…"),
    ("csv-crlf", "CSV with CRLF line ends (RFC 4180)…"),
    ("tsv", "TSV…"),
    ("json", "JSON…"),
)
"""Export menu entries: (the format ``SqlPanel.ask_export`` takes, label); the menu prefixes the
scope (``whole:`` or ``filtered:``), so that the entry chosen is what is written, unasked."""


def _short(name: str, limit: int = 32) -> str:
    return name if len(name) <= limit else name[: limit // 2 - 1] + "…" + name[-(limit // 2) + 1 :]


def _copy_as(grid: ResultGrid, fmt: TextFormat) -> Callable[[], object]:
    """A slot bound to one format (instead of ``lambda f=fmt: ...``, which mypy cannot type and
    which Qt could fill with the action's ``checked`` argument)."""
    return lambda: grid.copy_as(fmt, header=True)


def _export(grid: ResultGrid, key: str) -> Callable[[], object]:
    """A slot bound to one export choice (see ``_copy_as``)."""
    return lambda: grid.export_requested.emit(key)


def build_grid_menu(grid: ResultGrid, column: int) -> QMenu:
    """The menu for a right-click on ``column`` (-1: outside any column)."""
    menu = QMenu(grid)
    copy = menu.addAction("Copy", grid.copy_selection)
    copy.setShortcut(QKeySequence.StandardKey.Copy)
    menu.addAction("Copy with headers", grid.copy_with_headers)
    copy_as = menu.addMenu("Copy as")
    for fmt in TEXT_FORMATS:
        copy_as.addAction(FORMAT_NAMES[fmt], _copy_as(grid, fmt))
    columns = grid.column_names()
    has_rows = grid.model() is not None and grid.model().rowCount() > 0
    for action in (copy, *menu.actions()[1:]):
        action.setEnabled(has_rows)
    if 0 <= column < len(columns):
        name = _short(columns[column])
        values = menu.addAction(f"Copy values of “{name}”", lambda: grid.copy_column(column))
        values.setEnabled(has_rows)
        menu.addSeparator()
        value = grid.current_value(column)
        menu.addAction(f"Filter “{name}”…", lambda: grid.filter_requested.emit(column, "contains", None))
        if value is None:
            menu.addAction(
                f"Rows where “{name}” is NULL", lambda: grid.filter_requested.emit(column, "is NULL", None)
            )
        else:
            text = cell_text(value)  # the filter matches cells as copied (row_filter.Condition)
            menu.addAction(
                f"Rows where “{name}” equals “{_short(text, 24)}”",
                lambda: grid.filter_requested.emit(column, "equals", text),
            )
    if grid.filter_active():
        menu.addAction("Clear filter", grid.clear_filter_requested.emit)
    menu.addSeparator()
    if grid.filter_active():
        shown = grid.model().rowCount()
        filtered = menu.addMenu(f"Export the {shown:,} filtered row{'' if shown == 1 else 's'}")
        filtered.setEnabled(has_rows)
        for key, label in EXPORT_CHOICES:
            filtered.addAction(label, _export(grid, f"filtered:{key}"))
    export = menu.addMenu("Export whole result")
    export.setEnabled(bool(columns))
    for key, label in EXPORT_CHOICES:
        export.addAction(label, _export(grid, f"whole:{key}"))
    return menu


def attach_menu(grid: ResultGrid) -> None:
    """Open this menu where ``grid`` asks for it (a right-click on a cell or a column header)."""

    def show(column: int, where: QPoint) -> None:
        menu = build_grid_menu(grid, column)
        menu.exec(where)
        menu.deleteLater()

    grid.menu_requested.connect(show)
