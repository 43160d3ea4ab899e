"""The SQL editor and the result grid of one database.

Ctrl+Enter runs the statement on the pool: the job opens a paged cursor and fetches the first
page, so a slow statement never blocks the UI; later pages are fetched by the grid's model as the
user scrolls (a page of an already-running statement is quick).  A statement that is not
read-only is refused by the core's guard, and the reason is shown under the editor.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QModelIndex, QPoint, QStandardPaths, Qt, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop.core.db.connection import ReadOnlyDatabase
from sqale_desktop.core.db.cursor import QueryCursor
from sqale_desktop.core.export_formats import TextFormat, column_values, format_rows
from sqale_desktop.ui.export import ExportFormat, export_rows
from sqale_desktop.ui.query_history import QueryHistoryPanel
from sqale_desktop.ui.result_model import PAGE_SIZE, ResultTableModel
from sqale_desktop.ui.row_filter import FilterBar, Operator, RowFilterProxy
from sqale_desktop.ui.sql_editor import SqlEditor
from sqale_desktop.ui.workers import JobContext, TaskPool

if TYPE_CHECKING:
    from sqale_desktop.ui.chart_view import ChartView

GRID_ROW_CAP = 1_000_000
"""Rows the grid will page through before saying "truncated" (exports are not capped)."""


def _twin(db: ReadOnlyDatabase) -> ReadOnlyDatabase:
    """Another handle on the same file, opened the same way (no second probe of the file)."""
    return ReadOnlyDatabase(
        db.path, immutable=db.immutable, time_limit_s=db.time_limit_s, notes=list(db.notes)
    )


class ResultGrid(QTableView):
    """The grid: sortable, Ctrl+C copies the selection as TSV, a context menu on cells and headers.

    Its model is a ``RowFilterProxy`` over the panel's ``ResultTableModel`` (the quick filter).

    Signals:
        copied(str): the text put on the clipboard.
        export_requested(str): "Export whole result" chose a format (``SqlPanel.ask_export``'s).
        filter_requested(int, str, object): filter a column: (column, operator, text or None).
        clear_filter_requested(): the menu's "Clear filter".
    """

    copied = Signal(str)
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
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        # Size columns from the first rows only: measuring every loaded row costs ~0.25 ms a row.
        self.horizontalHeader().setResizeContentsPrecision(40)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(
            lambda pos: self._show_menu(self.columnAt(pos.x()), self.viewport().mapToGlobal(pos))
        )
        header = self.horizontalHeader()
        header.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(
            lambda pos: self._show_menu(header.logicalIndexAt(pos), header.mapToGlobal(pos))
        )
        QShortcut(
            QKeySequence.StandardKey.Copy,
            self,
            self.copy_selection,
            context=Qt.ShortcutContext.WidgetShortcut,
        )

    def _show_menu(self, column: int, where: QPoint) -> None:
        from sqale_desktop.ui.grid_menu import build_grid_menu

        menu = build_grid_menu(self, column)
        menu.exec(where)
        menu.deleteLater()

    def fit_columns(self, max_width: int = 320) -> None:
        """Size columns to the first page's contents, none wider than ``max_width`` pixels."""
        self.resizeColumnsToContents()
        header = self.horizontalHeader()
        for column in range(header.count()):
            if header.sectionSize(column) > max_width:
                header.resizeSection(column, max_width)

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

    def _shown_rows(self) -> list[list[Any]]:
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
        """Ctrl+C: the selection as TSV, with a header row when more than one row is selected."""
        model = self.result_model()
        if model is None:
            return ""
        indexes = self._source_indexes(list(self.selectedIndexes()))
        return self._put(model.tsv(indexes, with_header=len({i.row() for i in indexes}) > 1))

    def copy_as(self, fmt: TextFormat, header: bool = True) -> str:
        """The selection (or, with nothing selected, every row shown) in ``fmt``."""
        model = self.result_model()
        if model is None:
            return ""
        indexes = self._source_indexes(list(self.selectedIndexes()))
        if indexes:
            columns, rows = model.selection(indexes)
        else:
            columns, rows = model.columns, self._shown_rows()
        return self._put(format_rows(columns, rows, fmt, header=header))

    def copy_column(self, column: int) -> str:
        """The values of ``column`` in every row shown, one a line."""
        model = self.model()
        if model is None or not 0 <= column < model.columnCount():
            return ""
        role = Qt.ItemDataRole.UserRole
        rows = [[model.index(r, column).data(role)] for r in range(model.rowCount())]
        return self._put(column_values(rows, 0))


class SqlPanel(QWidget):
    """Editor, buttons, a message line and the grid for one open database.

    Signals:
        query_finished(object): a ResultTableModel with the first page loaded.
        query_failed(str): the message (refusals say why the statement is not read-only).
        user_ran(str, object, object, object): the user ran SQL: (sql, row count or None, error or
            None, milliseconds to the first page).
        export_finished(str, int): path and number of rows written.
        export_failed(str): the message.
        export_folder_chosen(str): the folder the user exported to (the window remembers it).
    """

    query_finished = Signal(object)
    query_failed = Signal(str)
    user_ran = Signal(str, object, object, object)
    export_finished = Signal(str, int)
    export_failed = Signal(str)
    export_folder_chosen = Signal(str)

    def __init__(self, db: ReadOnlyDatabase, pool: TaskPool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # The grid's own handle on the file: its paged cursor stays open on one pool thread's
        # connection while the user scrolls, and must not share that connection with the row
        # counts or the integrity check that run on the page's handle.
        self.db = _twin(db)
        self._pool = pool
        self._job: JobContext | None = None
        self._jobs: list[JobContext] = []  # every job started, for closing the tab safely
        self._generation = 0
        self._last_sql = ""
        self.model: ResultTableModel | None = None
        self.proxy: RowFilterProxy | None = None
        self.folder_provider: Callable[[], str] | None = None
        """Where the export dialog starts (the window's remembered folder); see ``export_folder``."""
        self._last_folder = ""
        self._started = time.perf_counter()

        self.editor = SqlEditor(self)
        self.editor.run_requested.connect(lambda: self.run())
        self.run_button = QPushButton("Run", self)
        self.run_button.setToolTip("Run the statement (Ctrl+Enter)")
        self.run_button.clicked.connect(lambda: self.run())
        self.format_button = QPushButton("Format", self)
        self.format_button.clicked.connect(self.editor.format)
        self.copy_button = QPushButton("Copy SQL", self)
        self.copy_button.setToolTip("Copy the SQL (Ctrl+Shift+C)")
        self.copy_button.clicked.connect(self.copy_sql)
        self.csv_button = QPushButton("Export CSV…", self)
        self.csv_button.clicked.connect(lambda: self.ask_export("csv"))
        self.json_button = QPushButton("Export JSON…", self)
        self.json_button.clicked.connect(lambda: self.ask_export("json"))
        self.message = QLabel("", self)
        self.message.setObjectName("sqlMessage")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.grid = ResultGrid(self)
        self.filter_bar = FilterBar(self)
        self.grid.export_requested.connect(self.ask_export)
        self.grid.filter_requested.connect(self._filter_column)
        self.grid.clear_filter_requested.connect(self.filter_bar.clear)
        self.grid.copied.connect(self._copied)

        buttons = QHBoxLayout()
        for button in (self.run_button, self.format_button, self.copy_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.csv_button)
        buttons.addWidget(self.json_button)
        top = QWidget(self)
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        top_layout.addWidget(self.editor, 1)
        top_layout.addLayout(buttons)
        top_layout.addWidget(self.message)
        splitter = QSplitter(Qt.Orientation.Vertical, self)
        splitter.addWidget(top)
        result = QWidget(self)
        result_layout = QVBoxLayout(result)
        result_layout.setContentsMargins(0, 0, 0, 0)
        result_layout.setSpacing(2)
        result_layout.addWidget(self.filter_bar)
        result_layout.addWidget(self.grid, 1)
        self.history = QueryHistoryPanel(self)
        self.history.rerun_requested.connect(self._rerun_from_history)
        self.history.open_requested.connect(self._open_from_history)
        self.views = QTabWidget(self)
        self.views.setObjectName("resultViews")
        self.views.setDocumentMode(True)
        self.result_tab = result
        self.views.addTab(result, "Result")
        # The chart is built the first time its tab is shown (pyqtgraph loads then, not at launch).
        self.chart_tab = QWidget(self)
        QVBoxLayout(self.chart_tab).setContentsMargins(0, 0, 0, 0)
        self.chart: ChartView | None = None
        self._chart_next = False
        self.views.addTab(self.chart_tab, "Chart")
        self.views.addTab(self.history, "Query history")
        self.views.currentChanged.connect(lambda _i: self._view_changed())
        splitter.addWidget(self.views)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(splitter)
        QShortcut(
            QKeySequence("Ctrl+Shift+C"),
            self,
            self.copy_sql,
            context=Qt.ShortcutContext.WidgetWithChildrenShortcut,
        )
        self._set_export_enabled(False)

    # running --------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._job is not None

    def run(self, sql: str | None = None, by_user: bool = True) -> None:
        """Run the editor's SQL (or ``sql``, which then replaces the editor's text) on the pool.

        ``by_user``: the user ran it (Ctrl+Enter, Run), as opposed to the window showing an
        answer; only the user's runs are reported through ``user_ran`` (and kept in the history).
        """
        if sql is not None:
            self.editor.set_sql(sql)
        text = self.editor.sql().strip()
        if not text:
            return
        self._start(text, text, by_user)

    def _start(
        self,
        sql: str,
        shown_sql: str,
        by_user: bool = False,
        sorted_by: tuple[int, Qt.SortOrder] | None = None,
    ) -> None:
        self.stop()
        self._generation += 1
        generation = self._generation
        self._last_sql = shown_sql
        if self.model is not None:
            self.model.close_cursor()  # its connection is free for the next statement
        self.message.setText("Running…")
        self._started = time.perf_counter()
        db = self.db

        def job(ctx: JobContext) -> tuple[QueryCursor, list[Any], float]:
            ctx.on_cancel(db.interrupt)  # the watchdog's backstop; the flag below is what Stop sets
            started = time.perf_counter()
            cursor = db.cursor(sql, max_rows=GRID_ROW_CAP, cancel=ctx.cancel)
            first = cursor.fetch_page(PAGE_SIZE, cancel=ctx.cancel)
            return cursor, first, time.perf_counter() - started

        self._job = self._pool.start(
            job,
            finished=lambda result: self._finished(generation, result, by_user, sorted_by),
            failed=lambda exc: self._failed(generation, exc, by_user),
        )
        self._jobs.append(self._job)

    def jobs(self) -> list[JobContext]:
        self._jobs = [job for job in self._jobs if not job.finished]
        return list(self._jobs)

    def release(self) -> None:
        """Stop, and close the grid's connections (the window calls this when the tab closes)."""
        self.stop()
        if self.model is not None:
            self.model.close_cursor()
        self.db.close()

    def stop(self) -> None:
        """Cancel the running statement, if any (Stop and Esc do this too)."""
        if self._job is not None:
            self._job.request_cancel()
            self._job = None

    def _finished(
        self,
        generation: int,
        result: tuple[QueryCursor, list[Any], float],
        by_user: bool,
        sorted_by: tuple[int, Qt.SortOrder] | None = None,
    ) -> None:
        cursor, first, seconds = result
        if generation != self._generation:
            cursor.close()
            return
        self._job = None
        old = self.model
        model = ResultTableModel(cursor, first, self, sorted_by=sorted_by)
        model.resort_requested.connect(self._resort)
        model.rows_loaded.connect(lambda _n: self._describe(model, seconds))
        proxy = RowFilterProxy(self)
        proxy.setSourceModel(model)
        old_proxy, self.proxy = self.proxy, proxy
        self.model = model
        self.grid.setModel(proxy)
        self.filter_bar.attach(proxy, model.columns)
        model.rows_loaded.connect(lambda _n: self.filter_bar.describe())
        model.rows_loaded.connect(lambda _n: self._view_changed())
        column, order = sorted_by or (-1, Qt.SortOrder.AscendingOrder)
        self.grid.horizontalHeader().setSortIndicator(column, order)  # a no-op sort: already in order
        self.grid.fit_columns()
        if old is not None:
            old.deleteLater()
        if old_proxy is not None:
            old_proxy.deleteLater()
        self._describe(model, seconds)
        self._set_export_enabled(bool(model.columns))
        if self._chart_next:
            self._chart_next = False
            self.views.setCurrentWidget(self.chart_tab)
        self._view_changed()
        self.query_finished.emit(model)
        if by_user:
            rows = model.rowCount() if model.complete else None
            self.user_ran.emit(self._last_sql, rows, None, round(seconds * 1000))

    def _describe(self, model: ResultTableModel, seconds: float) -> None:
        rows = model.rowCount()
        if not model.columns:
            self.message.setText(f"The statement ran ({seconds * 1000:.0f} ms) and returned no columns.")
            return
        if model.complete:
            capped = model.truncated
            note = f" (stopped at the {GRID_ROW_CAP:,}-row cap; export gets all)" if capped else ""
            self.message.setText(f"{rows:,} rows{note} · {seconds * 1000:.0f} ms")
        else:
            self.message.setText(f"{rows:,} rows loaded, more as you scroll · {seconds * 1000:.0f} ms")

    def _failed(self, generation: int, exc: BaseException, by_user: bool) -> None:
        if generation != self._generation:
            return
        self._job = None
        text = str(exc) or type(exc).__name__
        self.message.setText(f"⚠ {text}")
        self.query_failed.emit(text)
        if by_user:
            elapsed = round((time.perf_counter() - self._started) * 1000)
            self.user_ran.emit(self._last_sql, None, text, elapsed)

    def _resort(self, column: int, order: Qt.SortOrder) -> None:
        """Sort the whole result: re-run the statement wrapped in ORDER BY (column position)."""
        direction = "DESC" if order == Qt.SortOrder.DescendingOrder else "ASC"
        base = self._last_sql.rstrip().rstrip(";")
        self._start(
            f"SELECT * FROM ({base}) ORDER BY {column + 1} {direction}",
            self._last_sql,
            sorted_by=(column, order),
        )

    # clipboard and export -------------------------------------------------------------------
    def copy_sql(self) -> str:
        text = self.editor.sql()
        QGuiApplication.clipboard().setText(text)
        self.message.setText("SQL copied to the clipboard.")
        return text

    def _set_export_enabled(self, enabled: bool) -> None:
        self.csv_button.setEnabled(enabled)
        self.json_button.setEnabled(enabled)

    # the chart -------------------------------------------------------------------------------
    def chart_next_result(self) -> None:
        """Show the Chart tab when the next result arrives (the answer card's Chart button)."""
        self._chart_next = True

    def show_chart(self) -> ChartView:
        self.views.setCurrentWidget(self.chart_tab)
        return self._ensure_chart()

    def _ensure_chart(self) -> ChartView:
        if self.chart is None:
            from sqale_desktop.ui.chart_view import ChartView

            self.chart = ChartView(self.chart_tab)
            self.chart.export_requested.connect(self.ask_chart_export)
            layout = self.chart_tab.layout()
            assert layout is not None
            layout.addWidget(self.chart)
        return self.chart

    def _view_changed(self) -> None:
        """Redraw the chart when it is in view (its tab chosen, a new result, more rows loaded)."""
        if self.views.currentWidget() is not self.chart_tab:
            return
        chart = self._ensure_chart()
        model = self.model
        if model is None:
            chart.set_data([], [], True)
        else:
            chart.set_data(model.columns, model.loaded_rows, model.complete)

    def ask_chart_export(self, fmt: str) -> None:
        """Ask where to save the chart as PNG or SVG; render now, write the file on the pool."""
        if self.chart is None:
            return
        suggested = self.export_folder() / f"chart.{fmt}"
        name, _ = QFileDialog.getSaveFileName(
            self, f"Export the chart as {fmt.upper()}", str(suggested), f"{fmt.upper()} images (*.{fmt})"
        )
        if not name:
            return
        folder = str(Path(name).parent)
        self._last_folder = folder
        self.export_folder_chosen.emit(folder)
        self.export_chart(Path(name), fmt)

    def export_chart(self, path: Path, fmt: str) -> None:
        from sqale_desktop.ui.chart_view import write_export

        if self.chart is None:
            return
        payload = self.chart.render_image() if fmt == "png" else self.chart.svg_bytes()
        self._jobs.append(
            self._pool.start(
                lambda _ctx: write_export(path, payload),
                finished=lambda _p: self._chart_exported(path),
                failed=self._export_failed,
            )
        )

    def _chart_exported(self, path: Path) -> None:
        self.message.setText(f"Chart saved to {path}.")
        self.export_finished.emit(str(path), 0)

    def _rerun_from_history(self, sql: str) -> None:
        self.views.setCurrentWidget(self.result_tab)
        self.run(sql)

    def _open_from_history(self, sql: str) -> None:
        self.editor.set_sql(sql)
        self.editor.setFocus()

    def _copied(self, text: str) -> None:
        lines = text.count("\n") + 1
        self.message.setText(f"Copied {lines:,} line{'s' if lines != 1 else ''} to the clipboard.")

    def _filter_column(self, column: int, operator: Operator, text: object) -> None:
        self.filter_bar.edit_column(column, operator, None if text is None else str(text))

    def export_folder(self) -> Path:
        """Where the export dialog starts: the last folder used (this session's, else the one the
        window remembers), else the user's documents folder; never the process's working
        directory, which for a desktop app is wherever it happened to be launched from."""
        for candidate in (self._last_folder, self.folder_provider() if self.folder_provider else ""):
            if candidate and Path(candidate).is_dir():
                return Path(candidate)
        documents = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
        if documents and Path(documents).is_dir():
            return Path(documents)
        return Path.home()

    def ask_export(self, choice: str = "csv") -> None:
        """Ask where to write the whole result; ``choice`` is csv, csv-crlf (RFC 4180), tsv or json."""
        fmt: ExportFormat = "csv" if choice.startswith("csv") else "tsv" if choice == "tsv" else "json"
        suggested = self.export_folder() / f"result.{fmt}"
        name, _ = QFileDialog.getSaveFileName(
            self,
            f"Export the whole result as {fmt.upper()}",
            str(suggested),
            f"{fmt.upper()} files (*.{fmt})",
        )
        if not name:
            return
        folder = str(Path(name).parent)
        self._last_folder = folder
        self.export_folder_chosen.emit(folder)
        self.export(Path(name), fmt, newline="\r\n" if choice == "csv-crlf" else None)

    def export(self, path: Path, fmt: ExportFormat, newline: str | None = None) -> None:
        """Write the whole result of the last statement (re-run, uncapped) on the pool; CSV and TSV
        lines end with ``newline`` (the platform's by default)."""
        sql = self._last_sql
        if not sql:
            return
        source = self.db
        self.message.setText(f"Exporting to {path.name}…")

        def job(ctx: JobContext) -> int:
            db = _twin(source)  # its own connection: the grid's cursor may be mid-scroll
            ctx.on_cancel(db.interrupt)
            with db, db.cursor(sql, max_rows=2**62, cancel=ctx.cancel) as cursor:

                def rows() -> Any:
                    while True:
                        page = cursor.fetch_page(5000, cancel=ctx.cancel)
                        if not page:
                            return
                        yield from page

                return export_rows(path, cursor.columns, rows(), fmt, ctx.cancel, newline)

        self._jobs.append(
            self._pool.start(
                job, finished=lambda count: self._exported(path, count), failed=self._export_failed
            )
        )

    def _exported(self, path: Path, count: int) -> None:
        self.message.setText(f"Exported {count:,} rows to {path}.")
        self.export_finished.emit(str(path), count)

    def _export_failed(self, exc: BaseException) -> None:
        text = f"Export failed: {exc}"
        self.message.setText(text)
        self.export_failed.emit(text)
