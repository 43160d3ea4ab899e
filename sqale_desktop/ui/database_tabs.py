"""The open databases, one tab each: opened on the pool, closed, and remembered in the settings.

Opening a file runs on the pool (the file is checked, opened read-only and its schema read), so a
slow disk never freezes the window; a file that cannot be used is reported through ``error``, for
the banner at the top, not a dialog box in the way and not a crash.  What the window does with a
page (its chat, its conversation, the status bar) it does on this object's signals.

Every path is made absolute the moment it is asked for (:func:`absolute`): the open tabs, the
recent list and the active tab are read again by a launch that may start in another folder.  Opens
run in parallel and end in any order, so each takes a number when it is asked for and its tab goes
among the others by that number: tabs stand in the order they were asked for (the command line's,
the file dialog's, last session's), and one that ends late does not take the front from a tab
asked for after it.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QMenu,
    QProgressBar,
    QPushButton,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop.core.db.connection import ReadOnlyDatabase, open_readonly
from sqale_desktop.core.db.introspect import Schema, cached_schema
from sqale_desktop.core.imports import (
    ImportCrashed,
    ImportProgress,
    ImportResult,
    previewable,
    resolve_database,
)
from sqale_desktop.core.imports.preview import Preview, preview_source
from sqale_desktop.core.imports.progress import ImportCancelled
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.result_model import ResultTableModel
from sqale_desktop.ui.workers import JobContext, TaskPool

# How long the first rows of a CSV wait for its open to end before they bring up the importing tab.
PREVIEW_GRACE_MS = 250


class DatabaseTabs(QObject):
    """Opens, closes and restores the tabs of ``tabs``; keeps the recent-files menu; marks the tab
    the agent works in.

    ``settings`` returns the settings in force (the window replaces them when the user changes
    them) and ``save_settings`` stores them; the open tabs and the recent files live there.

    Signals:
        page_created(object): a DatabasePage was built, before it is shown: connect to it here.
        opened(object, object): (page, Schema) the page is in its tab, the recent list and the open
            tabs have it.
        closing(object): the page's tab is about to close (its episode is to be stopped first).
        open_failed(str): the error of a file that could not be opened (after ``error``).
        error(str): a message for the window's banner.
        message(str): a line for the status bar.
    """

    page_created = Signal(object)
    opened = Signal(object, object)
    closing = Signal(object)
    open_failed = Signal(str)
    error = Signal(str)
    message = Signal(str)

    def __init__(
        self,
        window: QWidget,
        tabs: QTabWidget,
        empty: QWidget,
        pool: TaskPool,
        settings: Callable[[], Settings],
        save_settings: Callable[[], None],
    ) -> None:
        super().__init__(window)
        self._window = window
        self._tabs = tabs
        self._empty = empty
        self._pool = pool
        self._settings = settings
        self._save_settings = save_settings
        self._opening: dict[Path, JobContext] = {}
        # An imported page's source (a CSV, a workbook, a folder): its tab, the recent list and
        # the restored tabs name the source, not the copy in the cache.
        self._sources: dict[DatabasePage, ImportResult] = {}
        # The number each open took when it was asked for, by its tab (page or importing tab).
        self._tickets = itertools.count()
        self._order: dict[QWidget, int] = {}
        self._front_ticket = -1  # the latest-asked open brought to the front so far
        # The restored tabs not answered yet (path -> number), and the one to come back in front:
        # until they are answered, what is saved keeps them, so a quit meanwhile loses nothing.
        self._restoring: dict[Path, int] = {}
        self._restore_front: Path | None = None
        self._closed = False
        self.recent_menu = QMenu("Open &Recent", window)
        tabs.tabCloseRequested.connect(self.close_tab)
        tabs.currentChanged.connect(lambda _index: self._remember_open_tabs())
        self.refresh_recent_menu()

    def pages(self) -> list[DatabasePage]:
        return [p for i in range(self._tabs.count()) if isinstance(p := self._tabs.widget(i), DatabasePage)]

    def current_page(self) -> DatabasePage | None:
        page = self._tabs.currentWidget()
        return page if isinstance(page, DatabasePage) else None

    def show_agent_state(self, running: DatabasePage | None, has_engine: bool) -> None:
        """Mark the tab the agent works in, and say on every other tab why Ask waits."""
        index = self._tabs.indexOf(running) if running is not None else -1
        for page in self.pages():
            i = self._tabs.indexOf(page)
            busy = page is running
            imported = self._sources.get(page)
            self._tabs.setTabText(i, ("● " if busy else "") + page.display_name)
            tip = imported.details() if imported else str(page.path)
            self._tabs.setTabToolTip(i, tip + ("\nThe agent is working here." if busy else ""))
            if running is not None and not busy:
                reason = (
                    f"Ask waits: the agent is answering in {running.display_name} (tab {index + 1}). "
                    "Stop it there or wait for its answer."
                )
            elif not has_engine:
                reason = "No model installed: Tools → Model Manager… downloads one."
            else:
                reason = ""
            page.chat.set_ask_enabled(has_engine and running is None, reason)
            page.chat.watch_button.setEnabled(running is None)

    def set_query_time_limit(self, seconds: float) -> None:
        """The settings changed the query deadline: the open databases' handles (tree and grid) use it."""
        for page in self.pages():
            page.db.time_limit_s = seconds
            page.sql.db.time_limit_s = seconds

    # opening --------------------------------------------------------------------------------
    def open_demo(self) -> None:
        from sqale_desktop.core.demo import ensure_demo_database

        self.open_job(lambda _ctx: ensure_demo_database(), "the demo database")

    def open_job(self, make_path: Any, what: str) -> None:
        """Run ``make_path`` on the pool (e.g. generate the demo), then open the file it returns,
        in the place of the moment it was asked for."""
        self.message.emit(f"Preparing {what}…")
        ticket = next(self._tickets)
        self._pool.start(
            make_path,
            finished=lambda path: self.open_database(path, _ticket=ticket),
            failed=self._preparing_failed,
        )

    def open_databases(self, paths: list[Path]) -> None:
        """Open ``paths`` (the file dialog's selection), in tabs in that order; the last in front."""
        for path in paths:
            self.open_database(path)

    def _preparing_failed(self, exc: BaseException) -> None:
        self.error.emit(str(exc))
        self.open_failed.emit(str(exc))  # the open it was for is answered, as a file's failure is

    def open_database(self, path: Path, front: bool = True, _ticket: int | None = None) -> None:
        """Open ``path`` on the pool; a database already open is brought to the front.

        ``front``: its tab comes to the front once open (unless a tab asked for after it already
        did); restored tabs other than the one that was in front open behind it.
        """
        path = absolute(path)
        for page in self.pages():
            if _same_file(self.source_of(page), path):
                if front:
                    self._tabs.setCurrentWidget(page)
                self._restore_answered(path)
                return
        if path in self._opening:
            return
        ticket = next(self._tickets) if _ticket is None else _ticket
        time_limit = self._settings().query_time_limit_s

        def job(ctx: JobContext) -> tuple[ReadOnlyDatabase, Schema, ImportResult | None]:
            # A CSV, workbook, Parquet/DuckDB file or folder is imported into the cache first
            # (reused when unchanged); its progress goes to the status bar, Stop is ctx.cancel.
            db_path, imported = resolve_database(path, progress=ctx.progress, cancel=ctx.cancel)
            db = open_readonly(db_path, time_limit_s=time_limit)
            try:
                return db, cached_schema(db), imported  # the tools reuse it: read a large schema once
            except BaseException:
                db.close()
                raise

        self.message.emit(f"Opening {path.name}…")
        # A data file is imported first, which can take a while: from its first progress report
        # (only imports report progress) its tab shows how far it is and a Stop button, until the
        # database is open or the import failed or was stopped.
        importing: list[_ImportingTab] = []
        # The first rows of a CSV, read on the pool beside the import (a 1 MB prefix: well within a
        # second), shown in the importing tab as soon as both exist; dropped once the open ends.
        preview: list[Preview] = []
        ended: list[bool] = []

        def show_tab() -> None:
            if not importing and not self._closed and not ended:
                importing.append(_ImportingTab(path.name, self.stop_opening))
                self._place(importing[0], path.name, ticket, front)
                self._tabs.show()
                self._empty.hide()
                for shown in preview:
                    importing[0].show_preview(shown)

        def previewed(result: Preview | None) -> None:
            if result is None or ended:
                return
            preview.append(result)
            for tab in importing:
                tab.show_preview(result)
            # The first rows are ready well before the import's first progress report (which
            # follows the source's checksum and a first batch: seconds for a 1 GB file), so they
            # bring the tab up themselves, unless the open ends in the next moment (an unchanged
            # file reopens from the cache at once: no tab flashes up and away).
            QTimer.singleShot(PREVIEW_GRACE_MS, self._tabs, show_tab)

        def report(p: ImportProgress) -> None:
            self.message.emit(p.line())
            show_tab()
            for tab in importing:
                tab.show_progress(p)

        def done(then: Callable[[], None]) -> None:
            ended.append(True)
            preview.clear()
            for tab in importing:
                self._tabs.removeTab(self._tabs.indexOf(tab))
                self._order.pop(tab, None)
                tab.deleteLater()
                if self._tabs.count() == 0:
                    self._tabs.hide()
                    self._empty.show()
            then()

        self._opening[path] = self._pool.start(
            job,
            finished=lambda result: done(lambda: self._opened(path, ticket, front, *result)),
            failed=lambda exc: done(lambda: self._open_failed(path, exc)),
            progress=report,
        )
        if previewable(path):
            self._pool.start(lambda _ctx: preview_source(path), finished=previewed)

    @property
    def opening(self) -> bool:
        """Whether an open or an import is still under way (its tab not answered yet)."""
        return bool(self._opening)

    def stop_opening(self) -> None:
        """Stop the imports and opens under way (Stop while a large file imports)."""
        for context in list(self._opening.values()):
            context.request_cancel()

    def source_of(self, page: DatabasePage) -> Path:
        """The file or folder the user opened for ``page`` (an import's source, or the database)."""
        imported = self._sources.get(page)
        return imported.source if imported is not None else page.path

    def _opened(
        self,
        path: Path,
        ticket: int,
        front: bool,
        db: ReadOnlyDatabase,
        schema: Schema,
        imported: ImportResult | None = None,
    ) -> None:
        self._opening.pop(path, None)
        if self._closed:
            db.close()
            return
        # The source as the user named it (absolute), not the copy in the cache.
        source = path if imported is not None else None
        page = DatabasePage(db, schema, self._pool, self._window, source=source)
        if imported is not None:
            self._sources[page] = imported
        self.page_created.emit(page)
        in_front = front or self._restore_front == path
        self._restore_answered(path)
        index = self._place(page, page.display_name, ticket, in_front)
        self._tabs.setTabToolTip(index, imported.details() if imported else str(db.path))
        self._tabs.show()
        self._empty.hide()
        self._settings().add_recent_database(str(path))
        self._remember_open_tabs()
        self.refresh_recent_menu()
        self.opened.emit(page, schema)
        if imported is not None:
            self.message.emit(imported.summary + (" (imported before, unchanged)" if imported.reused else ""))

    def _place(self, tab: QWidget, label: str, ticket: int, front: bool) -> int:
        """Put ``tab`` before the first tab asked for after it (else last); to the front if
        ``front`` and no tab asked for later came to the front already.  Returns its index."""
        later = [self._tabs.indexOf(w) for w, t in self._order.items() if t > ticket]
        index = min((i for i in later if i >= 0), default=self._tabs.count())
        self._order[tab] = ticket
        index = self._tabs.insertTab(index, tab, label)
        if front and ticket >= self._front_ticket:
            self._front_ticket = ticket
            self._tabs.setCurrentIndex(index)
        return index

    def _restore_answered(self, path: Path) -> None:
        """A restored tab opened or failed: what is saved follows the tabs from now on."""
        self._restoring.pop(path, None)
        if self._restore_front == path:
            self._restore_front = None

    def _open_failed(self, path: Path, exc: BaseException) -> None:
        self._opening.pop(path, None)
        self._restore_answered(path)
        if isinstance(exc, ImportCancelled):
            # A Stop the person chose is news, not an error: a line in the status bar, never the
            # red banner (issue 32, item 11).  The open is answered all the same.
            self.message.emit(str(exc))  # "Import of orders.csv stopped; nothing was kept."
        else:
            self.error.emit(f"Could not open {path.name}: {exc}")
        if isinstance(exc, ImportCrashed):
            # The file crashed or flooded its importer: it is not reopened at the next start, which
            # would only meet it again (issue 30).  Any other failure keeps its place to retry.
            self._remember_open_tabs()
        self.open_failed.emit(str(exc))

    def restore_tabs(self) -> int:
        """Reopen the tabs that were open when the app closed, in their order; on a first run, the
        demo shop.  Returns how many opens started: each ends in ``opened`` or ``open_failed``."""
        from sqale_desktop.core.demo import is_demo_database

        settings = self._settings()
        saved: list[Path] = []
        for entry in settings.open_databases:
            # An entry saved relative by an older version can only mean the folder started in.
            path = absolute(entry)
            if not any(_same_file(path, seen) for seen in saved):
                saved.append(path)
        if not saved:
            self.open_demo()
            return 1
        front = absolute(settings.active_database) if settings.active_database else None
        if front is not None:
            front = next((p for p in saved if _same_file(p, front)), None)
        self._restore_front = front
        for path in saved:
            # Asked for in their order: each takes its old place whenever its open ends.
            self._restoring[path] = next(self._tickets)
        for path in saved:
            ticket = self._restoring[path]
            # Without a tab saved in front (an older version's settings), the last one.
            in_front = path == front if front is not None else path == saved[-1]
            if is_demo_database(path):
                # Regenerated when the app's demo changed; the demo's path is the same file.
                self._open_demo_restored(path, ticket, in_front)
            else:
                self.open_database(path, front=in_front, _ticket=ticket)
        return len(saved)

    def _open_demo_restored(self, path: Path, ticket: int, front: bool) -> None:
        from sqale_desktop.core.demo import ensure_demo_database

        self.message.emit("Preparing the demo database…")

        def made(demo: Path) -> None:
            if not _same_file(absolute(demo), path):  # the app's demo moved: it takes the old place
                self._restore_answered(path)
                self._restoring[absolute(demo)] = ticket
            self.open_database(demo, front=front, _ticket=ticket)

        def failed(exc: BaseException) -> None:
            self._restore_answered(path)
            self._preparing_failed(exc)

        self._pool.start(lambda _ctx: ensure_demo_database(), finished=made, failed=failed)

    def refresh_recent_menu(self) -> None:
        settings = self._settings()
        self.recent_menu.clear()
        for entry in settings.recent_databases:
            action = self.recent_menu.addAction(entry)
            action.triggered.connect(lambda _checked=False, p=entry: self.open_database(Path(p)))
        self.recent_menu.setEnabled(bool(settings.recent_databases))

    # closing --------------------------------------------------------------------------------
    def close_tab(self, index: int) -> None:
        page = self._tabs.widget(index)
        if not isinstance(page, DatabasePage):
            return
        self.closing.emit(page)
        page.close_database()
        self._order.pop(page, None)
        self._tabs.removeTab(index)
        self._remember_open_tabs()
        self._sources.pop(page, None)
        page.setParent(None)
        self._release_when_idle(page)
        if self._tabs.count() == 0:
            self._tabs.hide()
            self._empty.show()

    def close_all(self) -> None:
        """The window closes: close every database (cancelling its jobs) and open nothing more.

        The tabs stay listed in the settings: they are to come back next time.
        """
        self._closed = True
        self.stop_opening()
        for page in self.pages():
            page.close_database()
            # Statements run in database worker processes: closing under a running one ends its
            # worker (the job gets "cancelled") instead of closing a connection under it, so the
            # window's shutdown never waits out a statement that Stop cannot reach.
            page.release()

    def release_all(self) -> None:
        """Release every page's files once the workers that used them have been joined."""
        for page in self.pages():
            page.release()

    def _release_when_idle(self, page: DatabasePage) -> None:
        """Close a closed tab's files once its cancelled jobs have unwound (they use them)."""
        if page.busy() and not self._closed:
            QTimer.singleShot(50, lambda: self._release_when_idle(page))
            return
        page.release()
        page.deleteLater()

    def _remember_open_tabs(self) -> None:
        """Save the open tabs in their order, and the one in front (absolute paths, all of them).

        Restored tabs still opening keep their places, and the tab that was in front stays the
        one saved until it is answered: a quit before the restore ends loses none of them.
        """
        if self._closed:
            return  # closing the window closes tabs; they are to come back next time
        entries = [(self._order.get(page, -1), self.source_of(page)) for page in self.pages()]
        for path, ticket in self._restoring.items():
            at = next((i for i, (t, _) in enumerate(entries) if t > ticket), len(entries))
            entries.insert(at, (ticket, path))
        settings = self._settings()
        settings.open_databases = [str(path) for _, path in entries]
        current = self.current_page()
        # An importing tab in front is not yet a tab to come back: the one saved stays.
        if self._restore_front is None and not isinstance(self._tabs.currentWidget(), _ImportingTab):
            settings.active_database = str(self.source_of(current)) if current is not None else ""
        self._save_settings()


class _ImportingTab(QWidget):
    """The tab of a data file while it is imported: what has been read so far, and Stop; for a CSV,
    its first rows as soon as they are read (:meth:`show_preview`), so a person sees at once that it
    is the right file while the rest imports.  The preview is only text on screen: the database page
    that replaces this tab reads the finished import, never these rows."""

    def __init__(self, name: str, stop: Callable[[], None]) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        self._top = QWidget(self)  # stretch above and below until a preview fills the space
        layout.addWidget(self._top, 1)
        self.label = QLabel(f"Importing {name}…", self)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 1000)
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setToolTip("Stop the import; nothing of it is kept")
        self.stop_button.clicked.connect(stop)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        layout.addWidget(self.stop_button, alignment=Qt.AlignmentFlag.AlignHCenter)
        self.preview_label = QLabel(self)
        self.preview_label.hide()
        self.preview = QTableView(self)
        self.preview.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.preview.setAlternatingRowColors(True)
        self.preview.verticalHeader().setDefaultSectionSize(22)
        self.preview.hide()
        layout.addWidget(self.preview_label)
        layout.addWidget(self.preview, 4)
        self._bottom = QWidget(self)
        layout.addWidget(self._bottom, 1)

    def show_progress(self, progress: ImportProgress) -> None:
        self.label.setText(progress.line())
        self.bar.setValue(round(progress.fraction * 1000))

    def show_preview(self, preview: Preview) -> None:
        """Show ``preview``'s rows in a read-only grid under the progress bar."""
        model = ResultTableModel(first_rows=preview.rows, columns=preview.columns, parent=self.preview)
        self.preview.setModel(model)
        self.preview.resizeColumnsToContents()
        for column in range(model.columnCount()):
            self.preview.setColumnWidth(column, min(self.preview.columnWidth(column), 300))
        self.preview_label.setText(f"Preview of the first {len(preview.rows):,} rows — importing the rest…")
        self.preview_label.show()
        self.preview.show()
        self._top.hide()
        self._bottom.hide()


def absolute(path: Path | str) -> Path:
    """``path`` with ``~`` expanded, made absolute against the folder the app runs in now, ``..``
    folded away: remembered, it names the same file to a launch from any other folder."""
    return Path(os.path.abspath(Path(path).expanduser()))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b
