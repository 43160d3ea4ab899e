"""The SQL panel of one database, split the way DB Browser for SQLite splits its own: the execution
area here (editor, Run / Stop, the message line), ``statement_runner`` (running on the pool),
``result_view`` and ``result_grid`` (the filter bar and the grid), ``result_export`` (export
dialogs and jobs) and ``chart_host`` (the Chart tab).

Ctrl+Enter or Run runs the statement; while it runs Run gives way to Stop (Esc does the same).  A
statement that is not read-only is refused by the core's guard, and the reason is shown under the
editor.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSplitter, QTabWidget, QVBoxLayout, QWidget

from sqale_desktop.core.db.connection import ReadOnlyDatabase
from sqale_desktop.core.query_history import CANCELLED
from sqale_desktop.ui.chart_host import ChartHost
from sqale_desktop.ui.export import ExportFormat
from sqale_desktop.ui.query_history import QueryHistoryPanel
from sqale_desktop.ui.result_export import ResultExporter
from sqale_desktop.ui.result_model import ResultTableModel
from sqale_desktop.ui.result_view import ResultView
from sqale_desktop.ui.row_filter import RowFilterProxy
from sqale_desktop.ui.sql_editor import SqlEditor
from sqale_desktop.ui.statement_runner import GRID_ROW_CAP, Failed, Ran, Statement, StatementRunner, twin
from sqale_desktop.ui.workers import JobContext, TaskPool

if TYPE_CHECKING:
    from sqale_desktop.ui.chart_view import ChartView

STOP_KEY = "Esc"
"""The window's Stop shortcut (``MainWindow``), named in the Stop button's tooltip."""


def _rows(count: int) -> str:
    return f"{count:,} row{'' if count == 1 else 's'}"


class SqlPanel(QWidget):
    """Editor, buttons, a message line and the result tabs for one open database.

    Signals:
        query_finished(object): a ResultTableModel with the first page loaded.
        query_failed(str): the message (refusals say why the statement is not read-only).
        user_ran(str, object, object, object): the user ran SQL: (sql, row count or None, error or
            None, milliseconds to the first page); a statement stopped has the error ``CANCELLED``.
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
        self.db = twin(db)
        self.runner = StatementRunner(self.db, pool, self)
        self.runner.running_changed.connect(self._running_changed)
        self.runner.finished.connect(self._finished)
        self.runner.failed.connect(self._failed)
        self._last_sql = ""

        self.editor = SqlEditor(self)
        self.editor.run_requested.connect(lambda: self.run())
        self.run_button = QPushButton("Run", self)
        self.run_button.setToolTip("Run the statement (Ctrl+Enter)")
        self.run_button.clicked.connect(lambda: self.run())
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setObjectName("stopQuery")
        self.stop_button.setToolTip(f"Stop the running statement ({STOP_KEY})")
        self.stop_button.clicked.connect(self.stop)
        self.stop_button.hide()
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

        self.result_tab = ResultView(self)
        self.grid = self.result_tab.grid
        self.filter_bar = self.result_tab.filter_bar
        self.grid.copied.connect(self._copied)
        self.exporter = ResultExporter(self.runner, self.grid, lambda: self._last_sql, self)
        self.grid.export_requested.connect(self.ask_export)
        self.exporter.message.connect(self.message.setText)
        self.exporter.export_finished.connect(self.export_finished)
        self.exporter.export_failed.connect(self.export_failed)
        self.exporter.export_folder_chosen.connect(self.export_folder_chosen)
        self.chart_tab = ChartHost(self)
        self.chart_tab.export_requested.connect(
            lambda fmt: self.exporter.ask_chart_export(self.chart_tab.export_payload, fmt)
        )
        self._chart_next = False
        self.history = QueryHistoryPanel(self)
        self.history.rerun_requested.connect(self._rerun_from_history)
        self.history.open_requested.connect(self._open_from_history)
        self.views = QTabWidget(self)
        self.views.setObjectName("resultViews")
        self.views.setDocumentMode(True)
        self.views.addTab(self.result_tab, "Result")
        self.views.addTab(self.chart_tab, "Chart")
        self.views.addTab(self.history, "Query history")
        self.views.currentChanged.connect(lambda _i: self._view_changed())

        buttons = QHBoxLayout()
        for button in (self.run_button, self.stop_button, self.format_button, self.copy_button):
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

    # what the window and the tests read -------------------------------------------------------
    @property
    def model(self) -> ResultTableModel | None:
        return self.result_tab.model

    @property
    def proxy(self) -> RowFilterProxy | None:
        return self.result_tab.proxy

    @property
    def chart(self) -> ChartView | None:
        return self.chart_tab.chart

    @property
    def running(self) -> bool:
        return self.runner.running

    @property
    def folder_provider(self) -> Callable[[], str] | None:
        return self.exporter.folder_provider

    @folder_provider.setter
    def folder_provider(self, provider: Callable[[], str] | None) -> None:
        self.exporter.folder_provider = provider

    def jobs(self) -> list[JobContext]:
        return self.runner.jobs()

    # running --------------------------------------------------------------------------------
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
        self._start(Statement(text, text, by_user))

    def _start(self, statement: Statement) -> None:
        self.runner.stop()
        self._last_sql = statement.shown_sql
        self.result_tab.close_cursor()  # its connection is free for the next statement
        self.message.setText("Running…")
        self.runner.start(statement)

    def stop(self) -> None:
        """Cancel the running statement, if any (the Stop button and Esc do this)."""
        self.runner.stop()

    def release(self) -> None:
        """Stop, and close the grid's connections (the window calls this when the tab closes)."""
        self.stop()
        self.result_tab.close_cursor()
        self.db.close()

    def _running_changed(self, running: bool) -> None:
        """While a statement runs, Stop stands where Run was (and takes the focus Run had)."""
        hidden, shown = self.run_button, self.stop_button
        if not running:
            hidden, shown = shown, hidden
        had_focus = hidden.hasFocus()
        shown.show()
        hidden.hide()
        if had_focus:
            shown.setFocus()

    def _finished(self, ran: Ran) -> None:
        model = self.result_tab.show_result(ran)
        seconds = ran.elapsed()  # Run to the grid laid out: what the person waited
        model.resort_requested.connect(self._resort)
        model.rows_loaded.connect(lambda _n: self._describe(model, seconds))
        model.rows_loaded.connect(lambda _n: self._view_changed())
        self._describe(model, seconds)
        self._set_export_enabled(bool(model.columns))
        if self._chart_next:
            self._chart_next = False
            self.views.setCurrentWidget(self.chart_tab)
        self._view_changed()
        self.query_finished.emit(model)
        if ran.statement.by_user:
            rows = model.rowCount() if model.complete else None
            self.user_ran.emit(ran.statement.shown_sql, rows, None, round(seconds * 1000))

    def _describe(self, model: ResultTableModel, seconds: float) -> None:
        rows = model.rowCount()
        if not model.columns:
            self.message.setText(f"The statement ran ({seconds * 1000:.0f} ms) and returned no columns.")
            return
        if model.complete:
            capped = model.truncated
            note = f" (stopped at the {GRID_ROW_CAP:,}-row cap; export gets all)" if capped else ""
            self.message.setText(f"{_rows(rows)}{note} · {seconds * 1000:.0f} ms")
        else:
            self.message.setText(f"{_rows(rows)} loaded, more as you scroll · {seconds * 1000:.0f} ms")

    def _failed(self, failure: Failed) -> None:
        if failure.cancelled:
            self.message.setText(f"Stopped: {failure.text} after {failure.milliseconds:,} ms.")
        else:
            self.message.setText(f"⚠ {failure.text}")
        self.query_failed.emit(failure.text)
        if failure.statement.by_user:
            error = CANCELLED if failure.cancelled else failure.text
            self.user_ran.emit(failure.statement.shown_sql, None, error, failure.milliseconds)

    def _resort(self, column: int, order: Qt.SortOrder) -> None:
        """Sort the whole result: re-run the statement wrapped in ORDER BY (column position)."""
        direction = "DESC" if order == Qt.SortOrder.DescendingOrder else "ASC"
        base = self._last_sql.rstrip().rstrip(";")
        wrapped = f"SELECT * FROM ({base}) ORDER BY {column + 1} {direction}"
        self._start(Statement(wrapped, self._last_sql, sorted_by=(column, order)))

    # clipboard and export -------------------------------------------------------------------
    def copy_sql(self) -> str:
        """Copy the editor's SQL; an empty editor copies nothing and says so (the clipboard keeps
        what it held)."""
        text = self.editor.sql()
        if not text.strip():
            self.message.setText("Nothing to copy: the editor is empty.")
            return ""
        QGuiApplication.clipboard().setText(text)
        self.message.setText("SQL copied to the clipboard.")
        return text

    def _copied(self, text: str) -> None:
        lines = text.count("\n") + 1
        self.message.setText(f"Copied {lines:,} line{'s' if lines != 1 else ''} to the clipboard.")

    def _set_export_enabled(self, enabled: bool) -> None:
        self.csv_button.setEnabled(enabled)
        self.json_button.setEnabled(enabled)

    def export_folder(self) -> Path:
        return self.exporter.export_folder()

    def ask_export(self, choice: str = "csv") -> None:
        """Ask where (and, with a quick filter on, what) to export; see ``ResultExporter``."""
        self.exporter.ask_export(choice)

    def export(self, path: Path, fmt: ExportFormat, newline: str | None = None) -> None:
        """Write the whole result of the last statement to ``path`` on the pool."""
        self.exporter.export(path, fmt, newline)

    def export_chart(self, path: Path, fmt: str) -> None:
        """Write the chart, as it is drawn now, to ``path`` as PNG or SVG."""
        if self.chart is not None:
            self.exporter.export_chart(path, self.chart_tab.export_payload(fmt))

    # the chart and the history ----------------------------------------------------------------
    def chart_next_result(self) -> None:
        """Show the Chart tab when the next result arrives (the answer card's Chart button)."""
        self._chart_next = True

    def show_chart(self) -> ChartView:
        self.views.setCurrentWidget(self.chart_tab)
        return self.chart_tab.ensure_chart()

    def _view_changed(self) -> None:
        """Redraw the chart when it is in view (its tab chosen, a new result, more rows loaded)."""
        if self.views.currentWidget() is not self.chart_tab:
            return
        model = self.model
        if model is None:
            self.chart_tab.show_rows([], [], True)
        else:
            self.chart_tab.show_rows(model.columns, model.loaded_rows, model.complete)

    def _rerun_from_history(self, sql: str) -> None:
        self.views.setCurrentWidget(self.result_tab)
        self.run(sql)

    def _open_from_history(self, sql: str) -> None:
        self.editor.set_sql(sql)
        self.editor.setFocus()
