"""The main window: open databases in tabs, each with its conversation; the agent; the status bar.

Opening a file runs on the pool (the file is checked, opened read-only and its schema read), so a
slow disk never freezes the window; a file that cannot be used leaves a clear message in the
banner at the top, not a dialog box in the way and not a crash.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QGuiApplication,
    QKeySequence,
    QShortcut,
)
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QProgressBar,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop.core import settings as settings_mod
from sqale_desktop.core.agent.events import Episode
from sqale_desktop.core.db.connection import ReadOnlyDatabase, open_readonly
from sqale_desktop.core.db.introspect import Schema, cached_schema
from sqale_desktop.core.query_history import QueryRun, runs_from_entries
from sqale_desktop.core.runtime import EngineFactory, EpisodeFn
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.agent_runner import AgentRunner
from sqale_desktop.ui.banners import BannerStack
from sqale_desktop.ui.chat_widgets import ended_by_status
from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.episode_controller import EpisodeController
from sqale_desktop.ui.episode_view import EpisodeView
from sqale_desktop.ui.help_menu import add_help_menu
from sqale_desktop.ui.workers import JobContext, TaskPool

log = logging.getLogger(__name__)

EngineResolver = Callable[[Settings], tuple[EngineFactory | None, str, EpisodeFn]]
"""Settings -> (engine factory or None, status-bar description, episode function)."""

MODEL_AFFECTING = ("engine", "server_url", "model_id", "gpu_layers", "n_threads", "n_ctx")
"""Settings that change the loaded engine; any other change (theme, limits, rows, sampling) keeps it."""
RECORDING_DELAY_S = 0.03
"""Pause between streamed chunks of the recorded demo episode: readable, about 250 characters/s."""

"""How often streamed events are applied: 25 times a second is smooth and bounds the UI's work."""


class MainWindow(QMainWindow):
    """Everything the user sees.

    Signals:
        database_opened(object): a DatabasePage is ready.
        open_failed(str): the message shown for a file that could not be opened.
        episode_finished(object): the Episode (or None when it could not run at all).
        model_checked(object): the chosen model's GGUF metadata was read (GgufInfo, or None).
    """

    database_opened = Signal(object)
    open_failed = Signal(str)
    episode_finished = Signal(object)
    model_checked = Signal(object)

    def __init__(
        self,
        settings: Settings | None = None,
        engine_factory: EngineFactory | None = None,
        episode_fn: EpisodeFn | None = None,
        history: Any = None,
        resolve_engine: EngineResolver | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._resolve_engine = resolve_engine
        self.setWindowTitle("SQaLe Desktop")
        self.resize(1360, 840)
        self.setAcceptDrops(True)
        self.settings = settings or settings_mod.load().settings
        self.history = history
        self.pool = TaskPool(max_threads=3, parent=self)
        from sqale_desktop.core.runtime import episode_fn as default_episode_fn
        from sqale_desktop.core.runtime import open_tool_database

        self.runner = AgentRunner(
            engine_factory,
            episode_fn or default_episode_fn(self.settings),
            lambda path: open_tool_database(path, self.settings.query_time_limit_s),
            self,
        )
        self.episodes = EpisodeController(self.runner, history, self)
        self.episodes.running_changed.connect(self._refresh_ask_state)
        self.episodes.context_used.connect(self._context_used)
        self.episodes.finished.connect(self._episode_finished)
        self.runner.engine_state.connect(self._engine_state)
        self.runner.load_progress.connect(self._load_progress)
        self._opening: dict[Path, JobContext] = {}
        self._closed = False
        self.has_engine = engine_factory is not None
        self.recording_delay = RECORDING_DELAY_S
        self.model_checkpoint: str | None = None  # the checkpoint the chosen GGUF was built from
        self._model_job: JobContext | None = None
        self.models_dialog: Any = None  # the model manager while it is open

        self._build_ui()
        self._build_menus()
        self.refresh_recent_menu()
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, self.stop, context=Qt.ShortcutContext.WindowShortcut)
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._system_scheme_changed)
        if not self.has_engine:
            self._engine_state("failed", "none installed")
            self.model_label.setToolTip(
                "No model is installed: Tools → Models… downloads one. SQL works meanwhile."
            )

    # layout ---------------------------------------------------------------------------------
    def _build_ui(self) -> None:
        central = QWidget(self)
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.banner = QWidget(central)
        self.banner.setObjectName("errorBanner")
        self.banner.setAutoFillBackground(True)
        self.banner.setStyleSheet(
            "#errorBanner { background: #b3261e; } #errorBanner QLabel { color: white; }"
        )
        banner_layout = QHBoxLayout(self.banner)
        banner_layout.setContentsMargins(10, 6, 10, 6)
        self.banner_label = QLabel("", self.banner)
        self.banner_label.setWordWrap(True)
        self.banner_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        dismiss = QPushButton("Dismiss", self.banner)
        dismiss.clicked.connect(self.banner.hide)
        banner_layout.addWidget(self.banner_label, 1)
        banner_layout.addWidget(dismiss)
        self.banner.hide()
        self.offer = QWidget(central)
        self.offer.setObjectName("modelOffer")
        offer_layout = QHBoxLayout(self.offer)
        offer_layout.setContentsMargins(10, 6, 10, 6)
        offer_label = QLabel(
            "No model is installed yet. Browsing and SQL work now; to ask questions in plain words, "
            "download the SQaLe model (about 1.2 GB).",
            self.offer,
        )
        offer_label.setWordWrap(True)
        download = QPushButton("Download the model…", self.offer)
        download.setToolTip("Finds the suggested GGUF build, downloads it with progress and selects it")
        download.clicked.connect(self.download_suggested_model)
        later = QPushButton("Later", self.offer)
        later.clicked.connect(self.offer.hide)
        offer_layout.addWidget(offer_label, 1)
        offer_layout.addWidget(download)
        offer_layout.addWidget(later)
        self.offer.hide()
        self.tabs = QTabWidget(central)
        self.tabs.setDocumentMode(True)
        self.tabs.setTabsClosable(True)
        self.tabs.setMovable(True)
        self.tabs.tabCloseRequested.connect(self.close_tab)
        self.tabs.currentChanged.connect(self._tab_changed)
        self.empty = QLabel(
            "<h2>No database open</h2><p>Open a SQLite file with <b>Ctrl+O</b>, drop one here, "
            "or pick one from File → Open Recent.</p>",
            central,
        )
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        # Notices about the model (not one of the agents, context above its training) concern every
        # tab; messages about one database live on that tab (DatabasePage.banners).
        self.model_banners = BannerStack(central)
        layout.addWidget(self.banner)
        layout.addWidget(self.model_banners)
        layout.addWidget(self.offer)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.empty, 1)
        self.tabs.hide()
        self.setCentralWidget(central)

        bar = self.statusBar()
        self.model_label = QLabel("", self)
        self.model_label.setObjectName("modelStatus")
        self.model_progress = QProgressBar(self)
        self.model_progress.setMaximumWidth(140)
        self.model_progress.setTextVisible(False)
        self.model_progress.hide()
        self.context_label = QLabel("", self)
        self.context_label.setObjectName("contextStatus")
        self.message_label = QLabel("", self)
        bar.addWidget(self.message_label, 1)
        bar.addPermanentWidget(self.context_label)
        bar.addPermanentWidget(self.model_progress)
        bar.addPermanentWidget(self.model_label)

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        open_action = QAction("&Open Database…", self)
        open_action.setShortcut(QKeySequence.StandardKey.Open)
        open_action.triggered.connect(self.ask_open)
        file_menu.addAction(open_action)
        self.recent_menu = QMenu("Open &Recent", self)
        file_menu.addMenu(self.recent_menu)
        demo_action = QAction("Open the &Demo Shop", self)
        demo_action.triggered.connect(self.open_demo)
        file_menu.addAction(demo_action)
        clear_action = QAction("C&lear Conversation…", self)
        clear_action.triggered.connect(lambda: self.clear_conversation())
        file_menu.addAction(clear_action)
        conversations_action = QAction("Stored Conversations…", self)
        conversations_action.triggered.connect(self.show_conversations)
        file_menu.addAction(conversations_action)
        close_action = QAction("&Close Database", self)
        close_action.setShortcut(QKeySequence.StandardKey.Close)
        close_action.triggered.connect(lambda: self.close_tab(self.tabs.currentIndex()))
        file_menu.addAction(close_action)
        file_menu.addSeparator()
        quit_action = QAction("&Quit", self)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)
        tools = self.menuBar().addMenu("&Tools")
        settings_action = QAction("&Settings…", self)
        settings_action.triggered.connect(self.show_settings)
        tools.addAction(settings_action)
        models_action = QAction("&Models…", self)
        models_action.triggered.connect(self.show_models)
        tools.addAction(models_action)
        self.stop_action = QAction("S&top", self)
        self.stop_action.triggered.connect(lambda: self.stop())
        tools.addAction(self.stop_action)
        add_help_menu(self)

    # databases ------------------------------------------------------------------------------
    def pages(self) -> list[DatabasePage]:
        return [p for i in range(self.tabs.count()) if isinstance(p := self.tabs.widget(i), DatabasePage)]

    def current_page(self) -> DatabasePage | None:
        page = self.tabs.currentWidget()
        return page if isinstance(page, DatabasePage) else None

    def ask_open(self) -> None:
        name, _ = QFileDialog.getOpenFileName(
            self,
            "Open SQLite database",
            "",
            "SQLite databases (*.sqlite *.sqlite3 *.db *.db3 *.anki2);;All files (*)",
        )
        if name:
            self.open_database(Path(name))

    def open_demo(self) -> None:
        from sqale_desktop.core.demo import ensure_demo_database

        self.open_job(lambda _ctx: ensure_demo_database(), "the demo database")

    def open_job(self, make_path: Any, what: str) -> None:
        """Run ``make_path`` on the pool (e.g. generate the demo), then open the file it returns."""
        self.show_message(f"Preparing {what}…")
        self.pool.start(make_path, finished=self.open_database, failed=lambda exc: self.show_error(str(exc)))

    def open_database(self, path: Path) -> None:
        """Open ``path`` on the pool; a database already open is brought to the front."""
        path = Path(path).expanduser()
        for index, page in enumerate(self.pages()):
            if _same_file(page.path, path):
                self.tabs.setCurrentIndex(index)
                return
        if path in self._opening:
            return
        time_limit = self.settings.query_time_limit_s

        def job(_ctx: JobContext) -> tuple[ReadOnlyDatabase, Schema]:
            db = open_readonly(path, time_limit_s=time_limit)
            try:
                return db, cached_schema(db)  # the tools reuse it: read a large schema once
            except BaseException:
                db.close()
                raise

        self.show_message(f"Opening {path.name}…")
        self._opening[path] = self.pool.start(
            job,
            finished=lambda result: self._opened(path, *result),
            failed=lambda exc: self._open_failed(path, exc),
        )

    def _opened(self, path: Path, db: ReadOnlyDatabase, schema: Schema) -> None:
        self._opening.pop(path, None)
        if self._closed:
            db.close()
            return
        page = DatabasePage(db, schema, self.pool, self)
        page.chat.ask_requested.connect(lambda question, p=page: self.ask(p, question))
        page.chat.stop_requested.connect(lambda p=page: self.stop(p))
        page.chat.watch_requested.connect(lambda p=page: self.watch_recording(p))
        page.chat.set_recording_available(page.is_demo)
        page.copied.connect(lambda _t: self.show_message("Copied to the clipboard."))
        page.damaged.connect(self.show_message)
        page.sql.user_ran.connect(
            lambda sql, rows, error, ms, p=page: self._record_rerun(p, sql, rows, error, ms)
        )
        page.sql.folder_provider = lambda: self.settings.export_folder
        page.sql.export_folder_chosen.connect(self._remember_export_folder)
        index = self.tabs.addTab(page, db.name)
        self.tabs.setTabToolTip(index, str(db.path))
        self.tabs.setCurrentIndex(index)
        self.tabs.show()
        self.empty.hide()
        self.settings.add_recent_database(str(path))
        self._remember_open_tabs()
        self.refresh_recent_menu()
        self._restore_conversation(page)
        self._show_large_schema_hint(page)
        self._refresh_ask_state()
        if not self.episodes.busy:  # a running episode's state stays in the status bar
            self.show_message(f"Opened {db.name}: {len(schema.visible())} tables and views.")
        self.database_opened.emit(page)

    def _open_failed(self, path: Path, exc: BaseException) -> None:
        self._opening.pop(path, None)
        self.show_error(f"Could not open {path.name}: {exc}")
        self.open_failed.emit(str(exc))

    def close_tab(self, index: int) -> None:
        page = self.tabs.widget(index)
        if not isinstance(page, DatabasePage):
            return
        if self.episodes.running_page() is page:
            self.stop(page)
        page.close_database()
        self.tabs.removeTab(index)
        self._remember_open_tabs()
        page.setParent(None)
        self._release_when_idle(page)
        if self.tabs.count() == 0:
            self.tabs.hide()
            self.empty.show()

    def _tab_changed(self, _index: int) -> None:
        page = self.current_page()
        self.setWindowTitle(f"{page.db.name} — SQaLe Desktop" if page is not None else "SQaLe Desktop")
        self._refresh_ask_state()

    def _release_when_idle(self, page: DatabasePage) -> None:
        """Close a closed tab's files once its cancelled jobs have unwound (they use them)."""
        if page.busy() and not self._closed:
            QTimer.singleShot(50, lambda: self._release_when_idle(page))
            return
        page.release()
        page.deleteLater()

    def restore_tabs(self) -> None:
        """Reopen the tabs that were open when the app closed; on a first run, the demo shop."""
        saved = [Path(p) for p in self.settings.open_databases]
        if not saved:
            self.open_demo()
            return
        from sqale_desktop.core.demo import is_demo_database

        for path in saved:
            if is_demo_database(path):
                self.open_demo()  # regenerated when the app's demo changed
            else:
                self.open_database(path)

    def _remember_open_tabs(self) -> None:
        if self._closed:
            return  # closing the window closes tabs; they are to come back next time
        self.settings.open_databases = [str(page.path) for page in self.pages()]
        self._save_settings()

    def _show_large_schema_hint(self, page: DatabasePage) -> None:
        """A database with 40+ tables: point at M_SQaLe (trained on large schemas), on its tab."""
        from sqale_desktop.core.models.catalog import large_schema_hint

        hint = large_schema_hint(len(page.schema_model.countable_tables()), self.model_checkpoint)
        if hint:
            page.banners.show_banner("large_schema", hint, "info", ("Models…", self.show_models))

    def refresh_recent_menu(self) -> None:
        self.recent_menu.clear()
        for entry in self.settings.recent_databases:
            action = self.recent_menu.addAction(entry)
            action.triggered.connect(lambda _checked=False, p=entry: self.open_database(Path(p)))
        self.recent_menu.setEnabled(bool(self.settings.recent_databases))

    # drag and drop --------------------------------------------------------------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.open_database(Path(url.toLocalFile()))
        event.acceptProposedAction()

    # the agent ------------------------------------------------------------------------------
    def ask(self, page: DatabasePage, question: str) -> int | None:
        """Start an episode for ``question`` on ``page``'s database; returns its id."""
        if self.episodes.busy or not self.has_engine:
            return None
        return self._start_episode(page, question)

    def watch_recording(self, page: DatabasePage) -> int | None:
        """Play the recorded demo episode on ``page`` through the real loop and tools (no model).

        The recording's completions go through the replay engine at a readable pace; every tool
        result is computed on the database now, and the answer ends in the real grid.
        """
        if self.episodes.busy:
            return None
        from sqale_desktop.core.engines.replay import ReplayEngine
        from sqale_desktop.core.runtime import episode_fn as default_episode_fn
        from sqale_desktop.ui.episodes import load_recording

        try:
            recording = load_recording()
        except (OSError, ValueError) as exc:
            page.banners.show_banner("recording", f"The recorded episode could not be read: {exc}", "error")
            return None
        delay = self.recording_delay

        def engine() -> Any:
            return ReplayEngine(recording.completions, chunk_chars=8, delay=delay)

        return self._start_episode(
            page, recording.question, (engine, default_episode_fn(self.settings)), recording=True
        )

    def _start_episode(
        self,
        page: DatabasePage,
        question: str,
        override: tuple[EngineFactory, EpisodeFn] | None = None,
        recording: bool = False,
    ) -> int:
        episode_id = self.episodes.start(page, question, override, recording)
        self.context_label.setText("")
        what = "Playing the recorded answer" if recording else "The agent is working"
        self.show_message(f"{what} in {page.db.name}…")  # never the last episode's "Stopped."
        self._refresh_ask_state()
        return episode_id

    def running_page(self) -> DatabasePage | None:
        """The tab whose episode is running, if one is."""
        return self.episodes.running_page()

    def stop(self, page: DatabasePage | None = None) -> None:
        """Esc / Stop on ``page`` (the current tab when None): cancel that tab's episode, if it runs
        there, and that tab's queries.  Another tab's episode is never stopped from here."""
        page = page if page is not None else self.current_page()
        running = self.running_page()
        if running is not None and running is page:
            self.runner.stop()
            self.show_message("Stopping…")
        elif running is not None:
            self.show_message(
                f"The agent is answering in {running.db.name}; Stop (or Esc) on that tab stops it."
            )
        if page is not None:
            page.stop_queries()

    def _context_used(self, tokens: int) -> None:
        self.context_label.setText(f"context {tokens:,} / {self.settings.n_ctx:,} tokens")

    def _episode_finished(
        self, page: DatabasePage, episode: Episode | None, error: str, recording: bool
    ) -> None:
        """The controller has given the episode to its page and the history: the window's part."""
        if episode is not None and episode.sql and episode.ended_by not in ("cancelled", "error"):
            # On the next turn of the event loop: the answer card gets painted first.
            sql = episode.sql
            QTimer.singleShot(0, self, lambda: None if self._closed else page.open_sql(sql))
        if error:
            self.show_message(f"The episode could not run: {error}")
        elif episode is not None:
            prefix = "Recording: " if recording else ""
            self.show_message(prefix + ended_by_status(episode.ended_by))
        self.episode_finished.emit(episode)

    def _refresh_ask_state(self) -> None:
        running = self.running_page()
        index = self.tabs.indexOf(running) if running is not None else -1
        for page in self.pages():
            i = self.tabs.indexOf(page)
            busy = page is running
            self.tabs.setTabText(i, ("● " if busy else "") + page.db.name)
            self.tabs.setTabToolTip(i, str(page.path) + ("\nThe agent is working here." if busy else ""))
            if running is not None and not busy:
                reason = (
                    f"Ask waits: the agent is answering in {running.db.name} (tab {index + 1}). "
                    "Stop it there or wait for its answer."
                )
            elif not self.has_engine:
                reason = "No model installed: Tools → Models… to download one."
            else:
                reason = ""
            page.chat.set_ask_enabled(self.has_engine and running is None, reason)
            page.chat.watch_button.setEnabled(running is None)

    def _engine_state(self, state: str, text: str) -> None:
        if state == "loading":
            self.model_progress.setRange(0, 0)
            self.model_progress.show()
            self.model_label.setText(f"Model: {text}")
        elif state == "ready":
            self.model_progress.hide()
            self.model_label.setText(f"Model loaded · {text}")
        else:
            self.model_progress.hide()
            self.model_label.setText(f"Model: {text}")

    def _load_progress(self, thousandths: int) -> None:
        """The engine reports how far loading got: the busy indicator becomes a percentage."""
        self.model_progress.setRange(0, 1000)
        self.model_progress.setValue(thousandths)

    def set_engine_factory(
        self, factory: EngineFactory | None, description: str = "", episode_fn: EpisodeFn | None = None
    ) -> None:
        """Use another engine (settings changed, a model was installed); loads on next use."""
        self.has_engine = factory is not None
        self.runner.set_engine_factory(factory, episode_fn)
        if factory is None:
            self._engine_state("failed", "no model installed")
        else:
            self.model_label.setText(f"Model: {description or 'not loaded yet'}")
        self._refresh_ask_state()
        if self._resolve_engine is not None:  # the app's own engine choice: a model from the registry
            self.check_model()

    # history --------------------------------------------------------------------------------
    def _restore_conversation(self, page: DatabasePage) -> None:
        if self.history is None:
            return
        try:
            conversation = self.history.conversation_for(page.path.resolve(), title=page.path.name)
            page.conversation_id = conversation.id
            entries = self.history.entries(conversation.id)
        except Exception as exc:
            self.show_error(f"Could not read the conversation history: {exc}")
            return
        last_sql = None
        for entry in entries:
            if entry.sql:
                last_sql = entry.sql
            if entry.kind == "rerun":
                continue  # hand-run SQL is listed in the query-history panel, not the chat
            if entry.episode is not None:
                page.chat.add_episode(EpisodeView.from_record(entry.episode))
            else:
                stub = Episode(
                    question=entry.question or "",
                    db=str(page.path),
                    sql=entry.sql,
                    ended_by="error",
                    error=entry.error or "interrupted: the app closed while this episode ran",
                )
                page.chat.add_episode(EpisodeView.from_record(stub))
        page.sql.history.set_runs(runs_from_entries(entries, page.path))
        if last_sql:
            page.open_sql(last_sql, run=False)  # where the user left off, ready to edit and run

    def _record_rerun(
        self, page: DatabasePage, sql: str, row_count: int | None, error: str | None, duration_ms: int
    ) -> None:
        """The user ran SQL by hand: list it in the query history and store it with the conversation."""
        run = QueryRun(sql, datetime.now(UTC), page.path.name, duration_ms, row_count, error)
        if self.history is not None and page.conversation_id is not None:
            try:
                entry_id = self.history.add_rerun(
                    page.conversation_id, sql, row_count=row_count, error=error, duration_ms=duration_ms
                )
                run = dataclasses.replace(run, entry_id=entry_id)
            except Exception as exc:  # history trouble must not stop the user's work
                log.warning("could not record the query: %s", exc)
        page.sql.history.add_run(run)

    def clear_conversation(self, page: DatabasePage | None = None, confirm: bool = True) -> bool:
        """Delete the stored conversation of ``page``'s database (questions, episodes, query
        history) and start an empty one; True when it was cleared."""
        page = page or self.current_page()
        if page is None or page.chat.current is not None:
            return False
        if confirm:
            from PySide6.QtWidgets import QMessageBox

            answer = QMessageBox.question(
                self,
                "Clear the conversation",
                f"Delete the questions, answers and query history kept for {page.path.name}? "
                "The database itself is not touched.",
            )
            if answer != QMessageBox.StandardButton.Yes:
                return False
        if self.history is not None and page.conversation_id is not None:
            try:
                with contextlib.suppress(KeyError):  # already deleted (Stored Conversations…)
                    self.history.delete_conversation(page.conversation_id)
                page.conversation_id = self.history.conversation_for(
                    page.path.resolve(), title=page.path.name
                ).id
            except Exception as exc:
                self.show_error(f"Could not clear the conversation: {exc}")
                return False
        page.chat.clear()
        page.sql.history.set_runs([])
        self.show_message(f"Cleared the conversation about {page.path.name}.")
        return True

    def show_conversations(self) -> None:
        """The stored conversations (also of databases not open), to delete the ones not wanted."""
        if self.history is None:
            return
        from sqale_desktop.ui.conversations_dialog import ConversationsDialog

        dialog = ConversationsDialog(self.history, self)
        dialog.deleted.connect(self._conversation_deleted)
        dialog.exec()

    def _conversation_deleted(self, conversation_id: int) -> None:
        for page in self.pages():
            if page.conversation_id == conversation_id:
                self.clear_conversation(page, confirm=False)

    def _remember_export_folder(self, folder: str) -> None:
        self.settings.export_folder = folder
        self._save_settings()

    # messages -------------------------------------------------------------------------------
    def show_error(self, text: str) -> None:
        """An error that concerns no tab in particular (a file that did not open, the settings)."""
        self.banner_label.setText(text)
        self.banner.show()
        self.show_message(text)

    def show_message(self, text: str) -> None:
        self.message_label.setText(text)

    def _save_settings(self) -> None:
        try:
            settings_mod.save(self.settings)
        except OSError as exc:
            self.show_message(f"Could not save settings: {exc}")

    # dialogs --------------------------------------------------------------------------------
    def show_settings(self) -> None:
        from sqale_desktop.ui.settings_dialog import SettingsDialog

        dialog = SettingsDialog(self.settings, self)
        if dialog.exec():
            self.apply_settings(dialog.result_settings())

    def _system_scheme_changed(self, _scheme: Qt.ColorScheme) -> None:
        """The system switched between light and dark: follow it unless the user chose one."""
        from PySide6.QtWidgets import QApplication

        from sqale_desktop.ui.palette import apply_theme

        app = QApplication.instance()
        if self.settings.theme == "system" and isinstance(app, QApplication):
            apply_theme(app, "system")
            for page in self.pages():
                page.refresh_palette()

    def apply_settings(self, new: Settings) -> None:
        """Save new settings and apply them: time limits, theme, and the engine next time it loads."""
        from PySide6.QtWidgets import QApplication

        from sqale_desktop.ui.palette import apply_theme

        old, self.settings = self.settings, new
        self._save_settings()
        for page in self.pages():
            page.db.time_limit_s = new.query_time_limit_s
            page.sql.db.time_limit_s = new.query_time_limit_s
        self.runner.worker.set_time_limit(new.query_time_limit_s)
        app = QApplication.instance()
        if new.theme != old.theme and isinstance(app, QApplication):
            apply_theme(app, new.theme)
            for page in self.pages():
                page.refresh_palette()
        if any(getattr(old, name) != getattr(new, name) for name in MODEL_AFFECTING):
            self.settings_changed()
        else:
            self._keep_engine()

    def _keep_engine(self) -> None:
        """Sampling, row and query limits changed: the next episode uses them, the model stays loaded."""
        if self._resolve_engine is None:
            return
        _factory, _description, episode_fn = self._resolve_engine(self.settings)
        self.runner.set_episode_fn(episode_fn)

    def settings_changed(self) -> None:
        """Rebuild the engine from the settings (a new model, another server)."""
        if self._resolve_engine is not None:
            self.set_engine_factory(*self._resolve_engine(self.settings))

    def show_models(self, start_suggested: bool = False) -> None:
        from sqale_desktop.ui.model_manager import ModelManagerDialog

        page = self.current_page()
        tables = len(page.schema_model.countable_tables()) if page is not None else None
        dialog = ModelManagerDialog(
            self.pool, self, active_model_id=self.settings.model_id, table_count=tables
        )
        dialog.model_chosen.connect(self._use_model)
        dialog.models_changed.connect(self.settings_changed)
        self.models_dialog = dialog
        if start_suggested:
            dialog.get_suggested()
        dialog.exec()
        self.models_dialog = None
        if self.has_engine:
            self.offer.hide()

    def _use_model(self, model_id: str) -> None:
        import dataclasses

        self.apply_settings(dataclasses.replace(self.settings, model_id=model_id, engine="llama"))

    def check_model(self) -> None:
        """Read the chosen model's GGUF header on the pool and warn, before the first question, when
        it is not one of the SQaLe agents or the context is above its training context."""
        if self._model_job is not None:
            self._model_job.request_cancel()
        self.model_banners.dismiss("fitness")
        self.model_banners.dismiss("context")
        if self.settings.engine != "llama":
            return
        model_id, n_ctx = self.settings.model_id, self.settings.n_ctx

        def job(_ctx: JobContext) -> tuple[Any, str | None]:
            from sqale_desktop.core.models.gguf_info import read_gguf_info
            from sqale_desktop.core.models.registry import Registry

            record = Registry().usable(model_id)
            if record is None:
                return None, None
            return read_gguf_info(record.path), record.source_checkpoint

        def done(result: tuple[Any, str | None]) -> None:
            self._model_job = None
            info, checkpoint = result
            if self._closed:
                return
            self.show_model_info(info, checkpoint, n_ctx)

        def failed(exc: BaseException) -> None:
            self._model_job = None
            if not self._closed:
                self.model_banners.show_banner("fitness", f"The model file could not be read: {exc}", "error")
                self.model_checked.emit(None)

        self._model_job = self.pool.start(job, finished=done, failed=failed)

    def show_model_info(self, info: Any, checkpoint: str | None, n_ctx: int) -> None:
        """Show what the model's metadata says (called with the result of ``check_model``)."""
        from sqale_desktop.core.models.gguf_info import context_warning, fitness_warning

        self.model_checkpoint = checkpoint
        if info is not None:
            warning = fitness_warning(info, checkpoint)
            if warning:
                self.model_banners.show_banner("fitness", warning, "warning", ("Models…", self.show_models))
            context = context_warning(info, n_ctx)
            if context:
                self.model_banners.show_banner("context", context, "warning")
        self.model_checked.emit(info)

    def download_suggested_model(self) -> None:
        """The first-run offer's one click: the model manager finds the suggested build of the
        default checkpoint, downloads it with progress and selects it (or offers conversion)."""
        self.show_models(start_suggested=True)

    def offer_model_download(self) -> None:
        """First run without a model: say so where it cannot be missed, with a way to fix it."""
        self.offer.show()

    # closing --------------------------------------------------------------------------------
    def shutdown(self) -> bool:
        """Cancel and join every worker: the agent thread and the pool."""
        if self._closed:
            return True
        self._closed = True
        for page in self.pages():
            page.close_database()
        agent_ok = self.runner.shutdown()
        self.runner.deliver_rest()  # the cancelled episode's EpisodeEnded goes to the history too
        pool_ok = self.pool.shutdown()
        for page in self.pages():
            page.release()
        return agent_ok and pool_ok

    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        super().closeEvent(event)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b
