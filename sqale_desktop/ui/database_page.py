"""One open database: its schema tree, its conversation and its SQL editor with the result grid.

A data file's page reads the import's copy in the cache (``path``) but is named after the file the
user opened (``source``, ``display_name``).
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout, QWidget

from sqale_desktop.core.db.connection import ReadOnlyDatabase
from sqale_desktop.core.db.identifiers import quote_identifier
from sqale_desktop.core.db.introspect import Schema
from sqale_desktop.core.demo import DEMO_QUESTIONS, is_demo_database
from sqale_desktop.ui.banners import BannerStack
from sqale_desktop.ui.chat_pane import ChatPane
from sqale_desktop.ui.schema_tree import SchemaBrowser, SchemaModel, count_rows_job
from sqale_desktop.ui.sql_highlight import format_sql
from sqale_desktop.ui.sql_panel import SqlPanel
from sqale_desktop.ui.workers import JobContext, TaskPool


class DatabasePage(QWidget):
    """Schema | chat | SQL, side by side, for one database.

    Signals:
        copied(str): text was put on the clipboard (for the status bar).
        damaged(str): the integrity check found problems (the first few, for people).
    """

    copied = Signal(str)
    damaged = Signal(str)

    def __init__(
        self,
        db: ReadOnlyDatabase,
        schema: Schema,
        pool: TaskPool,
        parent: QWidget | None = None,
        source: Path | None = None,
    ) -> None:
        super().__init__(parent)
        self.db = db
        self.path: Path = db.path
        """The SQLite file the page reads: the database itself, or an import's copy in the cache."""
        self.source: Path = source if source is not None else db.path
        """What the user opened (a CSV, a workbook, a folder, or the database): every name a
        person reads (tab, title, status, conversation) is this one's, never the cache copy's."""
        self.display_name = self.source.name
        self.conversation_id: int | None = None
        self._pool = pool
        self._count_job: JobContext | None = None
        self._check_job: JobContext | None = None

        self.schema_model = SchemaModel(self)
        self.schema_model.set_schema(schema)
        self.schema_browser = SchemaBrowser(self.schema_model, self)
        self.schema_tree = self.schema_browser.tree
        self.schema_tree.table_activated.connect(self.preview_table)
        self.schema_tree.copy_requested.connect(self.copy_text)
        schema_box = QWidget(self)
        schema_layout = QVBoxLayout(schema_box)
        schema_layout.setContentsMargins(0, 0, 0, 0)
        title = QLabel(f"<b>{html.escape(self.display_name)}</b>", schema_box)
        title.setToolTip(str(self.source) if source is None else f"{self.source}\nImported copy: {db.path}")
        schema_layout.addWidget(title)
        if db.notes:
            note = QLabel("ⓘ " + "; ".join(db.notes), schema_box)
            note.setWordWrap(True)
            note.setObjectName("dbNote")
            schema_layout.addWidget(note)
        schema_layout.addWidget(self.schema_browser, 1)

        self.chat = ChatPane(self)
        if is_demo_database(db.path):
            self.chat.set_suggestions([q.question for q in DEMO_QUESTIONS])
        self.sql = SqlPanel(db, pool, self)
        self.chat.open_in_editor.connect(self.open_sql)
        self.chat.copy_requested.connect(self.copy_text)
        self.chat.chart_requested.connect(self.chart_sql)

        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(schema_box)
        splitter.addWidget(self.chat)
        splitter.addWidget(self.sql)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 3)
        splitter.setStretchFactor(2, 3)
        splitter.setSizes([230, 520, 520])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        # Messages about this database (damaged, large schema, a failed recording) live on its tab.
        self.banners = BannerStack(self)
        self.damaged.connect(lambda text: self.banners.show_banner("damaged", text, "error"))
        layout.addWidget(self.banners)
        layout.addWidget(splitter, 1)
        self.is_demo = is_demo_database(db.path)
        self.sql.query_failed.connect(self._mark_grid_stale)
        self.sql.query_finished.connect(lambda _model: self._mark_grid_stale(None))
        self.count_rows()
        self.check_integrity()

    def check_integrity(self) -> None:
        """Run ``PRAGMA quick_check`` in the background: a file whose schema reads fine can still be
        damaged further in, and people should know before trusting its answers."""
        db = self.db

        def job(ctx: JobContext) -> list[str]:
            ctx.on_cancel(db.interrupt)
            result = db.execute("PRAGMA quick_check(20)", max_rows=20)
            return [str(row[0]) for row in result.rows]

        def done(lines: list[str]) -> None:
            if lines and lines != ["ok"]:
                problems = "; ".join(line.replace("\n", " ") for line in lines[:3])
                self.damaged.emit(
                    f"{self.display_name} is damaged (SQLite's integrity check: {problems}). "
                    "Answers may be wrong or incomplete."
                )

        def failed(exc: BaseException) -> None:
            from sqale_desktop.core.db.errors import CorruptDatabase, QueryInterrupted, QueryTimeout

            if isinstance(exc, CorruptDatabase):
                self.damaged.emit(str(exc))
            elif not isinstance(exc, QueryTimeout | QueryInterrupted):
                self.damaged.emit(f"The integrity check of {self.display_name} failed: {exc}")

        self._check_job = self._pool.start(job, finished=done, failed=failed)

    def count_rows(self) -> None:
        """Fill in row counts in the background, one table after another."""
        tables = self.schema_model.countable_tables()
        if not tables:
            return
        model = self.schema_model
        self._count_job = self._pool.start(
            count_rows_job(self.db, tables),
            progress=lambda item: model.set_row_count(item[0], item[1]),
        )

    def open_sql(self, sql: str, run: bool = True) -> None:
        """Put SQL in the editor (an answer to edit and rerun), formatted, and run it."""
        self.sql.editor.set_sql(format_sql(sql))
        if run:
            self.sql.run(by_user=False)

    def chart_sql(self, sql: str) -> None:
        """The answer card's Chart: run the answer in the grid and show the Chart tab with it."""
        self.sql.chart_next_result()
        self.open_sql(sql)

    def preview_table(self, table: str) -> None:
        """The table's rows in the grid, which comes to the front (not behind the query history)."""
        self.sql.views.setCurrentWidget(self.sql.result_tab)
        self.open_sql(f"SELECT * FROM {quote_identifier(table)}")

    def copy_text(self, text: str) -> None:
        QGuiApplication.clipboard().setText(text)
        self.copied.emit(text)

    def refresh_palette(self) -> None:
        """Re-colour SQL after a light/dark switch (highlighters pick colours for the palette)."""
        from sqale_desktop.ui.sql_highlight import SqlHighlighter

        for highlighter in self.findChildren(SqlHighlighter):
            highlighter.refresh_palette()
        if self.sql.chart is not None:  # the chart's background and pens follow the palette too
            self.sql.chart.apply_palette()
            self.sql.chart.redraw()

    def _mark_grid_stale(self, error: str | None) -> None:
        """A failed statement leaves the previous result greyed out and labelled, never passing
        for the answer to the statement that failed."""
        grid = self.sql.grid
        stale = error is not None and grid.model() is not None
        grid.setEnabled(not stale)
        grid.setToolTip("Previous result: the last statement failed." if stale else "")
        if stale:
            self.sql.message.setText(f"⚠ {error} — the grid below still shows the previous result.")

    @property
    def grid_stale(self) -> bool:
        return not self.sql.grid.isEnabled()

    def stop_queries(self) -> None:
        self.sql.stop()

    def close_database(self) -> None:
        """Cancel this page's jobs and stop its query; the handles close later, in ``release()``,
        once ``busy()`` is False (the window waits for that before it calls it)."""
        for job in (self._count_job, self._check_job):
            if job is not None:
                job.request_cancel()
        self.sql.stop()

    def busy(self) -> bool:
        """Whether a job of this page is still running on the pool."""
        jobs = [self._count_job, self._check_job, *self.sql.jobs()]
        return any(job is not None and not job.finished for job in jobs)

    def release(self) -> None:
        """Close both handles on the file (call once ``busy()`` is False: no job uses them)."""
        self.sql.release()
        self.db.close()
