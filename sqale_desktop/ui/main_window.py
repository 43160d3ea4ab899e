"""The main window: open databases in tabs, each with its conversation; the agent; the status bar.

The window composes: ``DatabaseTabs`` opens, closes and marks the tabs, ``Conversations`` restores
and clears what the history keeps of them, ``EpisodeController`` routes the agent's events to the
tab that asked, ``ModelAdvice`` checks the chosen model, ``StatusBar`` and the banners show what
happens.  What is left here is the menus, starting and stopping episodes, applying the settings,
and shutting all of it down.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
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
    QLabel,
    QMainWindow,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop.core import settings as settings_mod
from sqale_desktop.core.agent.events import Episode
from sqale_desktop.core.db.introspect import Schema
from sqale_desktop.core.db.process import set_memory_limit_mb
from sqale_desktop.core.engine_kinds import LLAMA, RECORDING, kind_of
from sqale_desktop.core.imports import DIALOG_LABEL, DIALOG_PATTERNS, isolated
from sqale_desktop.core.models.gguf_info import effective_n_ctx
from sqale_desktop.core.runtime import Runtime
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.agent_runner import AgentRunner
from sqale_desktop.ui.banners import BannerStack, ErrorBanner, ModelOffer
from sqale_desktop.ui.chat_widgets import ended_by_status
from sqale_desktop.ui.conversations import Conversations
from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.database_tabs import DatabaseTabs
from sqale_desktop.ui.episode_controller import EpisodeController
from sqale_desktop.ui.help_menu import add_help_menu
from sqale_desktop.ui.model_advice import ModelAdvice
from sqale_desktop.ui.status_bar import StatusBar
from sqale_desktop.ui.workers import TaskPool

Resolve = Callable[[Settings], Runtime]
"""Settings -> the runtime they choose (the app's: ``core.runtime.resolve``)."""

MODEL_MANAGER_ACTION = "Model &Manager…"
"""The Tools menu's entry for the model manager: every message names it "Tools → Model Manager…"."""
MODEL_AFFECTING = ("engine", "server_url", "model_id", "gpu_layers", "n_threads", "n_ctx")
"""Settings that change the loaded engine; any other change (theme, limits, rows, sampling) keeps it."""
OPEN_FOLDER_KEYS = "Ctrl+Shift+O"
"""File → Open Folder…'s shortcut (Ctrl+O's, with Shift)."""
RECORDING_DELAY_S = 0.03
"""Pause between streamed chunks of the recorded demo episode: readable, about 250 characters/s."""


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
        runtime: Runtime | None = None,
        history: Any = None,
        resolve: Resolve | None = None,
        parent: QWidget | None = None,
    ) -> None:
        """``runtime``: the engine, prompt and limits the agent starts with (default: what
        ``resolve``, else ``core.runtime.resolve``, makes of the settings).  ``resolve``: how a
        change of the settings that concerns the engine gives a new runtime, as in the app;
        without it the runtime keeps its engine (a test's scripted one) whatever they say.
        Other changes (sampling, limits, rows) retune the runtime either way.
        """
        super().__init__(parent)
        self._resolve = resolve
        self.setWindowTitle("SQaLe Desktop")
        self.resize(1360, 840)
        self.setAcceptDrops(True)
        self.settings = settings or settings_mod.load().settings
        set_memory_limit_mb(self.settings.query_memory_limit_mb)
        self.history = history
        self.pool = TaskPool(max_threads=3, parent=self)
        if runtime is None:
            from sqale_desktop.core.runtime import resolve as resolve_settings

            runtime = (resolve or resolve_settings)(self.settings)
        self.runner = AgentRunner(runtime, self)
        self.episodes = EpisodeController(self.runner, history, self)
        self.episodes.running_changed.connect(self._refresh_ask_state)
        self.episodes.context_used.connect(self._context_used)
        self.episodes.finished.connect(self._episode_finished)
        self._closed = False
        self.recording_delay = RECORDING_DELAY_S

        self._build_ui()
        self._build_parts()
        self._build_menus()
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._system_scheme_changed)
        if not self.has_engine:
            self.status.model_label.setToolTip(
                "No model is installed: Tools → Model Manager… downloads one. SQL works meanwhile."
            )
        self._show_engine()

    @property
    def runtime(self) -> Runtime:
        """The engine, prompt and limits the agent runs with (the agent thread keeps it)."""
        return self.runner.runtime

    @property
    def has_engine(self) -> bool:
        return self.runtime.factory is not None

    @property
    def engine_description(self) -> str:
        """The model in use as the status bar first names it (About shows it)."""
        return self.runtime.description

    # layout ---------------------------------------------------------------------------------
    def _build_ui(self) -> None:
        central = QWidget(self)
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.banner = ErrorBanner(central)
        self.offer = ModelOffer(central)
        self.offer.download_requested.connect(self.download_suggested_model)
        self.tabs = QTabWidget(central)
        self.tabs.setDocumentMode(True)
        self.tabs.setTabsClosable(True)
        self.tabs.setMovable(True)
        self.tabs.currentChanged.connect(self._tab_changed)
        self.empty = QLabel(
            "<h2>No database open</h2><p>Open a SQLite or data file with <b>Ctrl+O</b>, a folder of "
            "data files with <b>Ctrl+Shift+O</b>, drop one here, or pick one from File → Open Recent.</p>",
            central,
        )
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        # Notices about the model (not one of the agents, context above its training) concern every
        # tab; messages about one database live on that tab (DatabasePage.banners).
        self.model_banners = BannerStack(central, compact=True)
        layout.addWidget(self.banner)
        layout.addWidget(self.model_banners)
        layout.addWidget(self.offer)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.empty, 1)
        self.tabs.hide()
        self.setCentralWidget(central)

        self.status = StatusBar(self)
        self.setStatusBar(self.status)

    def _build_parts(self) -> None:
        """The objects the window composes, and what it shows of their signals."""
        self.runner.engine_state.connect(self.status.engine_state)
        self.runner.load_progress.connect(self.status.load_progress)
        self.databases = DatabaseTabs(
            self, self.tabs, self.empty, self.pool, lambda: self.settings, self._save_settings
        )
        self.databases.page_created.connect(self._connect_page)
        self.databases.opened.connect(self._page_opened)
        self.databases.closing.connect(self._page_closing)
        self.databases.error.connect(lambda text: self.show_error(text, topic="open"))
        self.databases.open_failed.connect(self.open_failed)
        self.databases.message.connect(self.show_message)
        self.conversations = Conversations(self.history, self, self.pages)
        self.conversations.error.connect(self.show_error)
        self.conversations.message.connect(self.show_message)
        self.conversations.open_requested.connect(self.open_database)
        self.model_advice = ModelAdvice(self.pool, self.model_banners, lambda: self.settings, self)
        self.model_advice.checked.connect(self.model_checked)
        self._model_info: Any = None  # the chosen model's GGUF metadata, for the context figure
        self.model_advice.checked.connect(self._model_read)
        self.model_advice.models_wanted.connect(self.show_models)

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        open_action = QAction("&Open Database…", self)
        open_action.setObjectName("open")
        open_action.setShortcuts(QKeySequence.StandardKey.Open)
        open_action.triggered.connect(self.ask_open)
        file_menu.addAction(open_action)
        folder_action = QAction("Open &Folder…", self)
        folder_action.setObjectName("open_folder")
        folder_action.setToolTip("Open a folder of data files as one database, a table per file")
        folder_action.setShortcut(QKeySequence(OPEN_FOLDER_KEYS))
        folder_action.triggered.connect(self.ask_open_folder)
        file_menu.addAction(folder_action)
        file_menu.addMenu(self.databases.recent_menu)
        demo_action = QAction("Open the &Demo Shop", self)
        demo_action.triggered.connect(self.open_demo)
        file_menu.addAction(demo_action)
        clear_action = QAction("C&lear Conversation…", self)
        clear_action.triggered.connect(lambda: self.clear_conversation())
        file_menu.addAction(clear_action)
        conversations_action = QAction("Stored Conversations…", self)
        conversations_action.triggered.connect(self.conversations.show_dialog)
        file_menu.addAction(conversations_action)
        close_action = QAction("&Close Database", self)
        close_action.setShortcuts(QKeySequence.StandardKey.Close)  # Ctrl+W and Ctrl+F4 on Linux
        close_action.triggered.connect(lambda: self.databases.close_tab(self.tabs.currentIndex()))
        file_menu.addAction(close_action)
        file_menu.addSeparator()
        quit_action = QAction("&Quit", self)
        # Some platforms' themes bind no key to Quit (the generic one, offscreen): Ctrl+Q there too.
        quit_keys = QKeySequence.keyBindings(QKeySequence.StandardKey.Quit) or [QKeySequence("Ctrl+Q")]
        quit_action.setShortcuts(quit_keys)
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)
        tools = self.menuBar().addMenu("&Tools")
        settings_action = QAction("&Settings…", self)
        settings_action.triggered.connect(self.show_settings)
        tools.addAction(settings_action)
        models_action = QAction(MODEL_MANAGER_ACTION, self)
        models_action.setObjectName("model_manager")
        models_action.triggered.connect(lambda: self.show_models())
        tools.addAction(models_action)
        self.stop_action = QAction("S&top", self)
        self.stop_action.setObjectName("stop")
        # Esc is the action's own shortcut, window-wide, so that the menu shows it beside Stop.
        self.stop_action.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        self.stop_action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.stop_action.triggered.connect(lambda: self.stop())
        tools.addAction(self.stop_action)
        # Window-wide, as in browsers and editors: the editor and the grid have no use for them.
        for keys, step in (("Ctrl+PgDown", 1), ("Ctrl+PgUp", -1)):
            QShortcut(
                QKeySequence(keys),
                self,
                lambda s=step: self.switch_tab(s),
                context=Qt.ShortcutContext.WindowShortcut,
            )
        add_help_menu(self, lambda: self.engine_description)

    # databases ------------------------------------------------------------------------------
    def pages(self) -> list[DatabasePage]:
        return self.databases.pages()

    def current_page(self) -> DatabasePage | None:
        return self.databases.current_page()

    def ask_open(self) -> None:
        """Ctrl+O: one or several files (each its own tab, in the order chosen)."""
        isolated.start_ahead()  # the importer warms up while the person chooses
        names, _ = QFileDialog.getOpenFileNames(
            self,
            "Open databases or data files",
            "",
            "Databases and data files (*.sqlite *.sqlite3 *.db *.db3 *.anki2 " + DIALOG_PATTERNS + ");;"
            "SQLite databases (*.sqlite *.sqlite3 *.db *.db3 *.anki2);;"
            f"Data files: {DIALOG_LABEL} ({DIALOG_PATTERNS});;All files (*)",
        )
        self.databases.open_databases([Path(name) for name in names])

    def ask_open_folder(self) -> None:
        """File → Open Folder…: a folder of data files opens as one database (as a dropped folder
        or one named on the command line does); a file dialog cannot pick a folder."""
        isolated.start_ahead()
        folder = QFileDialog.getExistingDirectory(self, "Open a folder of data files", "")
        if folder:
            self.open_database(Path(folder))

    def open_database(self, path: Path) -> None:
        """Open ``path`` in a tab (on the pool); a database already open is brought to the front."""
        self.databases.open_database(path)

    def open_demo(self) -> None:
        self.databases.open_demo()

    def restore_tabs(self) -> int:
        """Reopen the tabs that were open when the app closed; on a first run, the demo shop.
        Returns how many opens started (each ends in ``database_opened`` or ``open_failed``)."""
        return self.databases.restore_tabs()

    def _connect_page(self, page: DatabasePage) -> None:
        """A new tab's page: its questions come to the agent, its SQL runs to the history."""
        page.chat.ask_requested.connect(lambda question, p=page: self.ask(p, question))
        page.chat.stop_requested.connect(lambda p=page: self.stop(p))
        page.chat.follow_up_changed.connect(self.runner.prefetch_follow_up)
        page.chat.watch_requested.connect(lambda p=page: self.watch_recording(p))
        page.chat.set_recording_available(page.is_demo)
        page.copied.connect(lambda _t, p=page: self.show_message("Copied to the clipboard.", p))
        page.damaged.connect(lambda text, p=page: self.show_message(text, p))
        page.sql.user_ran.connect(
            lambda sql, rows, error, ms, p=page: self.conversations.record_rerun(p, sql, rows, error, ms)
        )
        page.sql.folder_provider = lambda: self.settings.export_folder
        page.sql.export_folder_chosen.connect(self._remember_export_folder)

    def _page_opened(self, page: DatabasePage, schema: Schema) -> None:
        """The tab is shown: its conversation comes back, then the window's chrome follows."""
        self.conversations.restore(page)
        self.model_advice.large_schema_hint(page)
        self._refresh_ask_state()
        self.banner.clear_topic("open")  # a file opened: an earlier "Could not open" is answered
        self.show_message(f"Opened {page.display_name}: {len(schema.visible())} tables and views.", page)
        self.database_opened.emit(page)

    def _page_closing(self, page: DatabasePage) -> None:
        if self.episodes.running_page() is page:
            self.stop(page)

    def _tab_changed(self, _index: int) -> None:
        page = self.current_page()
        self.setWindowTitle(f"{page.display_name} — SQaLe Desktop" if page is not None else "SQaLe Desktop")
        self.status.set_current(page)  # that tab's news and context figure, never another's
        self._refresh_ask_state()

    def switch_tab(self, step: int) -> None:
        """Ctrl+PageDown / Ctrl+PageUp: the next or previous tab, wrapping around."""
        count = self.tabs.count()
        if count > 1:
            self.tabs.setCurrentIndex((self.tabs.currentIndex() + step) % count)

    # drag and drop --------------------------------------------------------------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            isolated.start_ahead()  # the importer warms up until the drop
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
        from sqale_desktop.core.runtime import ModelChoice, resolve
        from sqale_desktop.ui.episodes import load_recording

        try:
            recording = load_recording()
        except (OSError, ValueError) as exc:
            page.banners.show_banner("recording", f"The recorded episode could not be read: {exc}", "error")
            return None
        completions, delay = tuple(recording.completions), self.recording_delay
        choice = ModelChoice(RECORDING, completions=completions, delay=delay)
        return self._start_episode(page, recording.question, resolve(self.settings, choice))

    def _start_episode(self, page: DatabasePage, question: str, runtime: Runtime | None = None) -> int | None:
        episode_id = self.episodes.start(page, question, runtime)
        if episode_id is None:  # a follow-up the history refused: the page says why
            return None
        self.status.clear_context()
        recording = runtime is not None and runtime.kind_facts.recording
        what = "Playing the recorded answer" if recording else "The agent is working"
        self.show_message(f"{what} in {page.display_name}…", page)  # never the last episode's "Stopped."
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
            self.show_message("Stopping…", page)
        elif running is not None:
            self.show_message(
                f"The agent is answering in {running.display_name}; Stop (or Esc) on that tab stops it."
            )
        if page is not None:
            page.stop_queries()

    def _context_used(self, tokens: int) -> None:
        """Out of the context the engine got: a local model's is clamped to its training context
        (``core.runtime`` builds it so, the "context" banner says so), not ``settings.n_ctx``.

        ``gguf_info`` is imported with the window, not here: this runs once per agent turn while the
        answer streams, and its first import (~15 ms) was one of the longest stalls (issue 32)."""
        kind = kind_of(self.settings.engine)
        info = self._model_info if kind is not None and kind.model_file else None
        self.status.show_context(tokens, effective_n_ctx(info, self.settings.n_ctx))

    def _model_read(self, info: Any) -> None:
        self._model_info = info

    def _episode_finished(
        self, page: DatabasePage, episode: Episode | None, error: str, recording: bool
    ) -> None:
        """The controller has given the episode to its page and the history: the window's part."""
        if episode is not None and episode.sql and episode.ended_by not in ("cancelled", "error"):
            # On the next turn of the event loop: the answer card gets painted first.
            sql = episode.sql
            QTimer.singleShot(0, self, lambda: None if self._closed else page.open_sql(sql))
        if error:
            self.show_message(f"The episode could not run: {error}", page)
        elif episode is not None:
            prefix = "Recording: " if recording else ""
            self.show_message(prefix + ended_by_status(episode.ended_by), page)
        self.episode_finished.emit(episode)

    def _refresh_ask_state(self) -> None:
        running = self.running_page()
        if running is not None:  # its context figure belongs to it, also once the episode ended
            self.status.context_about = running
        self.databases.show_agent_state(running, self.has_engine)

    def use_runtime(self, runtime: Runtime) -> None:
        """Use another runtime (settings changed, a model was installed); its engine loads on next use."""
        self.runner.set_runtime(runtime)
        self._show_engine()

    def _show_engine(self) -> None:
        """The status bar and the Ask buttons say which engine there is (or that there is none)."""
        if self.has_engine:
            self.status.model_label.setText(f"Model: {self.engine_description}")
        else:
            self.status.engine_state("failed", "no model installed")
        self._refresh_ask_state()
        if self._resolve is not None:  # the app's own engine choice: a model from the registry
            self.model_advice.check()

    # conversations --------------------------------------------------------------------------
    def clear_conversation(self, page: DatabasePage | None = None, confirm: bool = True) -> bool:
        """Delete the stored conversation of ``page``'s database (the current tab's when None);
        True when it was cleared."""
        return self.conversations.clear(page or self.current_page(), confirm)

    # messages -------------------------------------------------------------------------------
    def show_error(self, text: str, topic: str = "") -> None:
        """An error that concerns no tab in particular (a file that did not open, the settings).

        ``topic`` "open": a file that did not open; the next file that opens takes it away.
        """
        self.banner.show_text(text, topic)
        self.show_message(text)

    def show_message(self, text: str, about: DatabasePage | None = None) -> None:
        """A line in the status bar; ``about``: the tab it concerns (shown while that tab is current)."""
        self.status.show_text(text, about)

    def _save_settings(self) -> None:
        try:
            settings_mod.save(self.settings)
        except OSError as exc:
            self.show_message(f"Could not save settings: {exc}")

    def _remember_export_folder(self, folder: str) -> None:
        self.settings.export_folder = folder
        self._save_settings()

    # dialogs --------------------------------------------------------------------------------
    def show_settings(self) -> None:
        from sqale_desktop.ui.settings_dialog import SettingsDialog

        dialog = SettingsDialog(self.settings, self)
        if dialog.exec():
            self.apply_settings(dialog.result_settings())

    def _system_scheme_changed(self, _scheme: Qt.ColorScheme) -> None:
        """The system switched between light and dark: follow it unless the user chose one."""
        if self.settings.theme == "system":
            self._apply_theme("system")

    def _apply_theme(self, theme: str) -> None:
        """Re-palette the app, and re-colour what painted itself with the old palette (SQL, charts)."""
        from PySide6.QtWidgets import QApplication

        from sqale_desktop.ui.palette import apply_theme

        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, theme)
            for page in self.pages():
                page.refresh_palette()

    def apply_settings(self, new: Settings) -> None:
        """Save new settings and apply them: time limits, theme, and the engine next time it loads."""
        old, self.settings = self.settings, new
        self._save_settings()
        self.databases.set_query_time_limit(new.query_time_limit_s)
        set_memory_limit_mb(new.query_memory_limit_mb)
        if new.theme != old.theme:
            self._apply_theme(new.theme)
        if self._resolve is not None and any(getattr(old, n) != getattr(new, n) for n in MODEL_AFFECTING):
            self.settings_changed()
        else:
            # Sampling, row and query limits: the next episode uses them, the model stays loaded.
            self.runner.set_runtime(self.runtime.retune(new), keep_engine=True)

    def settings_changed(self) -> None:
        """Rebuild the engine from the settings (a new model, another server)."""
        if self._resolve is not None:
            self.use_runtime(self._resolve(self.settings))

    def show_models(self, start_suggested: bool = False) -> None:
        from sqale_desktop.ui.model_manager import ModelManagerDialog

        page = self.current_page()
        tables = len(page.schema_model.countable_tables()) if page is not None else None
        dialog = ModelManagerDialog(
            self.pool,
            self,
            active_model_id=self.settings.model_id,
            table_count=tables,
            engine=self.settings.engine,
        )
        dialog.model_chosen.connect(self._use_model)
        dialog.model_kept.connect(self._keep_model)
        dialog.models_changed.connect(self.settings_changed)
        if start_suggested:
            dialog.get_suggested()
        dialog.exec()
        if self.has_engine:
            self.offer.hide()

    def _use_model(self, model_id: str) -> None:
        self.apply_settings(dataclasses.replace(self.settings, model_id=model_id, engine=LLAMA))

    def _keep_model(self, model_id: str) -> None:
        """The model the local engine loads by default is now named in the settings; it stays loaded."""
        self.settings = dataclasses.replace(self.settings, model_id=model_id)
        self._save_settings()

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
        self.model_advice.close()
        self.databases.close_all()
        agent_ok = self.runner.shutdown()
        self.runner.deliver_rest()  # the cancelled episode's EpisodeEnded goes to the history too
        saved = self.episodes.flush()  # every finished episode is in the history before the app ends
        pool_ok = self.pool.shutdown()
        self.databases.release_all()
        return agent_ok and saved and pool_ok

    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        super().closeEvent(event)
