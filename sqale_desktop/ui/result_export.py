"""Exporting what the SQL panel shows (DB Browser for SQLite's ``ExportDataDialog``): the whole
result of the last statement, the rows a quick filter left, or the chart.

The whole result is the statement re-run to its end on the pool, on its own connection (the grid's
cursor may be mid-scroll), not only the pages loaded.  While a quick filter is on, the user is
asked which of the two to write: the filter covers the loaded rows only, so the file could
otherwise silently hold rows the grid hides, or miss rows it never loaded.  Files are written by
``ui.export`` (a temporary name, renamed at the end).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from PySide6.QtCore import QObject, QStandardPaths, Signal
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from sqale_desktop.ui.export import ExportFormat, export_rows
from sqale_desktop.ui.result_grid import ResultGrid
from sqale_desktop.ui.statement_runner import StatementRunner, twin
from sqale_desktop.ui.workers import JobContext

Scope = Literal["filtered", "whole"]

EXPORT_PAGE = 5000
"""Rows fetched at a time while the whole result is written."""


class ResultExporter(QObject):
    """Asks where (and, with a filter on, what) to export, and writes it on the runner's pool.

    Signals:
        export_finished(str, int): path and number of rows written (0 for a chart).
        export_failed(str): the message.
        export_folder_chosen(str): the folder the user exported to (the window remembers it).
        message(str): a line for the panel's message label.
    """

    export_finished = Signal(str, int)
    export_failed = Signal(str)
    export_folder_chosen = Signal(str)
    message = Signal(str)

    def __init__(
        self, runner: StatementRunner, grid: ResultGrid, last_sql: Callable[[], str], parent: QWidget
    ) -> None:
        super().__init__(parent)
        self._runner = runner
        self._grid = grid
        self._last_sql = last_sql
        self._dialog_parent = parent
        self.folder_provider: Callable[[], str] | None = None
        """Where the export dialog starts (the window's remembered folder); see ``export_folder``."""
        self.last_folder = ""

    def export_folder(self) -> Path:
        """Where the export dialog starts: the last folder used (this session's, else the one the
        window remembers), else the user's documents folder; never the process's working
        directory, which for a desktop app is wherever it happened to be launched from."""
        for candidate in (self.last_folder, self.folder_provider() if self.folder_provider else ""):
            if candidate and Path(candidate).is_dir():
                return Path(candidate)
        documents = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
        if documents and Path(documents).is_dir():
            return Path(documents)
        return Path.home()

    def _ask_path(self, title: str, name: str, filter_text: str) -> Path | None:
        chosen, _ = QFileDialog.getSaveFileName(
            self._dialog_parent, title, str(self.export_folder() / name), filter_text
        )
        if not chosen:
            return None
        folder = str(Path(chosen).parent)
        self.last_folder = folder
        self.export_folder_chosen.emit(folder)
        return Path(chosen)

    def ask_scope(self) -> Scope | None:
        """With a quick filter on: export the filtered rows or the whole result? None: cancelled."""
        model = self._grid.model()
        source = self._grid.result_model()
        shown = model.rowCount() if model is not None else 0
        loaded = source.rowCount() if source is not None else 0
        rows = f"{loaded:,} loaded row{'' if loaded == 1 else 's'}"
        text = f"A quick filter is on: {shown:,} of the {rows} match."
        if source is not None and not source.complete:
            text += " The filter covers only the loaded rows; the whole result has more."
        box = QMessageBox(QMessageBox.Icon.Question, "Export", text, parent=self._dialog_parent)
        box.setObjectName("exportScope")
        filtered = box.addButton(
            f"Export the {shown:,} filtered row{'' if shown == 1 else 's'}", QMessageBox.ButtonRole.AcceptRole
        )
        filtered.setObjectName("exportFiltered")
        whole = box.addButton("Export the whole result", QMessageBox.ButtonRole.AcceptRole)
        whole.setObjectName("exportWhole")
        box.addButton(QMessageBox.StandardButton.Cancel).setObjectName("exportCancel")
        box.setDefaultButton(filtered)
        box.exec()
        clicked = box.clickedButton()
        box.deleteLater()
        return "filtered" if clicked is filtered else "whole" if clicked is whole else None

    def ask_export(self, choice: str = "csv") -> None:
        """Ask where to write the result; ``choice`` is csv, csv-crlf (RFC 4180), tsv or json,
        optionally after the scope the grid's menu chose (``whole:csv``, ``filtered:json``); without
        one, a quick filter that is on makes it ask which rows."""
        chosen, _, choice = choice.rpartition(":")
        fmt: ExportFormat = "csv" if choice.startswith("csv") else "tsv" if choice == "tsv" else "json"
        scope: Scope | None = "whole"
        if chosen == "filtered" and self._grid.filter_active():
            scope = "filtered"
        elif not chosen and self._grid.filter_active():
            scope = self.ask_scope()
            if scope is None:
                return
        what = "the filtered rows" if scope == "filtered" else "the whole result"
        path = self._ask_path(
            f"Export {what} as {fmt.upper()}", f"result.{fmt}", f"{fmt.upper()} files (*.{fmt})"
        )
        if path is None:
            return
        newline = "\r\n" if choice == "csv-crlf" else None
        if scope == "filtered":
            self.export_shown(path, fmt, newline)
        else:
            self.export(path, fmt, newline)

    def export(self, path: Path, fmt: ExportFormat, newline: str | None = None) -> None:
        """Write the whole result of the last statement (re-run, uncapped) on the pool; CSV and TSV
        lines end with ``newline`` (the platform's by default)."""
        sql = self._last_sql()
        if not sql:
            return
        source = self._runner.db
        self.message.emit(f"Exporting to {path.name}…")

        def job(ctx: JobContext) -> int:
            db = twin(source)  # its own connection: the grid's cursor may be mid-scroll
            ctx.on_cancel(db.interrupt)
            with db, db.cursor(sql, max_rows=2**62, cancel=ctx.cancel) as cursor:

                def rows() -> Iterator[Sequence[Any]]:
                    while True:
                        page = cursor.fetch_page(EXPORT_PAGE, cancel=ctx.cancel)
                        if not page:
                            return
                        yield from page

                return export_rows(path, cursor.columns, rows(), fmt, ctx.cancel, newline)

        self._start(job, path)

    def export_shown(self, path: Path, fmt: ExportFormat, newline: str | None = None) -> None:
        """Write the rows the grid shows (a quick filter's survivors), as they are, on the pool."""
        columns, rows = self._grid.column_names(), self._grid.shown_rows()
        self.message.emit(f"Exporting to {path.name}…")
        self._start(lambda ctx: export_rows(path, columns, rows, fmt, ctx.cancel, newline), path)

    def _start(self, job: Callable[[JobContext], int], path: Path) -> None:
        self._runner.track(
            self._runner.pool.start(
                job, finished=lambda count: self._exported(path, count), failed=self._failed
            )
        )

    def _exported(self, path: Path, count: int) -> None:
        self.message.emit(f"Exported {count:,} row{'' if count == 1 else 's'} to {path}.")
        self.export_finished.emit(str(path), count)

    def _failed(self, exc: BaseException) -> None:
        text = f"Export failed: {exc}"
        self.message.emit(text)
        self.export_failed.emit(text)

    # the chart -------------------------------------------------------------------------------
    def ask_chart_export(self, render: Callable[[str], QImage | bytes], fmt: str) -> None:
        """Ask where to save the chart as PNG or SVG; ``render(fmt)`` runs now (on the UI thread,
        where the plot lives), the file is written on the pool."""
        path = self._ask_path(
            f"Export the chart as {fmt.upper()}", f"chart.{fmt}", f"{fmt.upper()} images (*.{fmt})"
        )
        if path is not None:
            self.export_chart(path, render(fmt))

    def export_chart(self, path: Path, payload: QImage | bytes) -> None:
        from sqale_desktop.ui.chart_view import write_export

        self._runner.track(
            self._runner.pool.start(
                lambda _ctx: write_export(path, payload),
                finished=lambda _p: self._chart_exported(path),
                failed=self._failed,
            )
        )

    def _chart_exported(self, path: Path) -> None:
        self.message.emit(f"Chart saved to {path}.")
        self.export_finished.emit(str(path), 0)
