"""The desktop app's entry point: ``run_app()`` builds the QApplication and the main window.

On first run the window opens the bundled demo shop (generated, not downloaded) and, when no
model is installed, offers the model manager; browsing and SQL work without a model.  Later
launches reopen the tabs that were open when the app closed.  Files given on the command line
(``sqale-desktop FILE...``, what "Open with" runs) open in tabs instead, through the window's own
open path, so a bad file gets the same message as Ctrl+O; the demo opens only when none of them
(or none of the tabs to restore) did.

``SQALE_DESKTOP_QUIT_AFTER_SHOWN=1`` is a hook for tests, CI and ``benchmarks/startup.py``: once the
window is shown the app prints ``{"event": "shown", ...}``, and once the launch's files (or the
demo) have opened or failed it prints ``{"event": "ready", "tabs": [...], "errors": [...]}`` (also
the tabs' ``sources`` and ``names``, the ``current`` tab's index and the window's ``title``) and
quits, each as one JSON line on stdout.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

from sqale_desktop import __version__
from sqale_desktop.core import logs
from sqale_desktop.core import settings as settings_mod
from sqale_desktop.core.runtime import resolve
from sqale_desktop.ui.main_window import MainWindow
from sqale_desktop.ui.palette import apply_theme
from sqale_desktop.ui.xcb_check import warn_if_xcb_cannot_load

log = logging.getLogger(__name__)


def create_application(argv: Sequence[str] | None = None) -> QApplication:
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(list(argv or sys.argv))
    app.setApplicationName("SQaLe Desktop")
    app.setApplicationVersion(__version__)
    app.setOrganizationName("sqale-desktop")
    # The desktop entry's name: Wayland compositors use it as the app id to find the icon.
    app.setDesktopFileName("sqale-desktop")
    return app


QUIT_AFTER_SHOWN_ENV = "SQALE_DESKTOP_QUIT_AFTER_SHOWN"
# The hook gives up (and says so, exit status 3) if the launch has not settled by then.
QUIT_HOOK_TIMEOUT_S = 120.0


class LaunchOpener(QObject):
    """Opens the launch's files in the window (without files, the tabs open last time), then the
    demo if none of them opened.

    Counts the window's ``database_opened`` / ``open_failed`` signals until every file has been
    answered; ``when_settled`` callbacks run once that is so (and the demo, when it was needed,
    too).  A tab that opens hides the window's error banner, so the failures' messages (exactly
    what Ctrl+O showed) are shown again once everything has settled: "Open with" on a bad file
    must not end on a silent demo.
    """

    def __init__(self, window: MainWindow, files: Sequence[Path]) -> None:
        super().__init__(window)
        self.window = window
        self.errors: list[str] = []
        self.messages: list[str] = []
        self._pending = 0
        self._demo_pending = False
        self._settled = False
        self._on_settled: list[Any] = []
        window.database_opened.connect(self._answered)
        window.open_failed.connect(self._failed)
        unique: list[Path] = []
        for path in files:
            if not any(_same_path(path, seen) for seen in unique):
                unique.append(path)
        self._pending = len(unique)
        for path in unique:
            window.open_database(path)  # the Ctrl+O path: same checks, same message
        if not unique:
            # Last session's tabs (the demo on a first run); each answers like a launch file.
            self._pending = window.restore_tabs()

    def when_settled(self, callback: Any) -> None:
        if self._settled:
            callback()
        else:
            self._on_settled.append(callback)

    def _open_demo(self) -> None:
        self._demo_pending = True
        self.window.open_demo()

    def _failed(self, message: str) -> None:
        if self._settled:
            return
        self.errors.append(message)
        # open_failed is emitted right after show_error: the banner holds Ctrl+O's own wording.  An
        # import the person stopped shows no error: the banner still holds an earlier one, or none.
        banner = self.window.banner
        if not banner.isHidden() and banner.topic == "open" and banner.text() not in self.messages:
            self.messages.append(banner.text())
        self._answered(None)

    def _answered(self, _page: Any) -> None:
        if self._settled:
            return
        if self._demo_pending:
            self._settle()
            return
        self._pending -= 1
        if self._pending > 0:
            return
        if not self.window.pages():
            self._open_demo()
        else:
            self._settle()

    def _settle(self) -> None:
        self._settled = True
        if self.messages:
            self.window.show_error("\n".join(self.messages), topic="open")
        for callback in self._on_settled:
            callback()
        self._on_settled.clear()


def _same_path(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def install_quit_hook(app: QApplication, window: MainWindow, opener: LaunchOpener, started: float) -> None:
    """The ``SQALE_DESKTOP_QUIT_AFTER_SHOWN`` hook: report shown, then the tabs, then quit."""

    def emit(**fields: Any) -> None:
        print(json.dumps(fields), flush=True)

    def ready(status: int = 0) -> None:
        emit(
            event="ready",
            tabs=[str(page.path) for page in window.pages()],
            sources=[str(page.source) for page in window.pages()],
            names=[window.tabs.tabText(i) for i in range(window.tabs.count())],
            current=window.tabs.currentIndex(),
            title=window.windowTitle(),
            errors=opener.messages,
            timed_out=status != 0,
        )
        app.exit(status)

    def shown() -> None:
        emit(event="shown", visible=window.isVisible(), seconds=round(time.perf_counter() - started, 3))
        opener.when_settled(ready)

    # A zero timer fires once the event loop runs, i.e. after the show event has been processed.
    QTimer.singleShot(0, shown)
    QTimer.singleShot(int(QUIT_HOOK_TIMEOUT_S * 1000), lambda: ready(3))


def build_main_window(first_run_offer: bool = True, *, open_demo: bool = True) -> MainWindow:
    """The main window (on the demo database unless ``open_demo`` is False), history restored.

    Its runtime is :func:`resolve`'s (``core.runtime.resolve``: the same decision the CLI's ``ask``
    and ``eval run`` make from the same settings), and it resolves again when they change."""
    from sqale_desktop.core.history import History

    loaded = settings_mod.load()
    settings = loaded.settings
    app = QApplication.instance()
    if isinstance(app, QApplication):
        apply_theme(app, settings.theme)
    history: History | None = None
    history_error = None
    try:
        history = History()
    except Exception as exc:  # a broken history file must not stop the app
        history_error = str(exc)
    window = MainWindow(settings, history=history, resolve=resolve)
    if loaded.note:
        window.show_error(loaded.note)
    if history_error:
        window.show_error(f"Conversation history unavailable: {history_error}")
    if open_demo:
        window.restore_tabs()  # the tabs open last time; on a first run, the demo shop
    if window.has_engine:
        # In the background, so the first question does not wait for it: loading, then the
        # protocol's system turn (restored from disk when an earlier launch saved it).
        window.runner.load_engine()
    elif first_run_offer:
        QTimer.singleShot(300, window.offer_model_download)
    return window


def run_app(argv: Sequence[str] | None = None, files: Sequence[Path] = (), verbose: bool = False) -> int:
    """Start the desktop app with ``files`` in tabs (without files, the tabs open last time, or the
    demo on a first run; the demo too if none opens); the exit status.  ``verbose``: everything
    (DEBUG) is logged to the terminal and the log file, as ``sqale-desktop --verbose`` promises."""
    started = time.perf_counter()
    logs.configure(verbose=verbose)
    log.debug("sqale-desktop %s window, files: %s", __version__, [str(f) for f in files] or "none")
    sys.excepthook = logs.log_uncaught  # an exception escaping a slot is a bug: its traceback is logged
    if QApplication.instance() is None:
        warn_if_xcb_cannot_load()  # before Qt aborts with a message that may name the wrong library
    # Qt sees only the program name: file names are ours, and one that looks like a Qt option
    # (``-style``) must not be taken as one.
    app = create_application(argv if argv is not None else sys.argv[:1])
    window = build_main_window(open_demo=False)
    opener = LaunchOpener(window, list(files))
    if os.environ.get(QUIT_AFTER_SHOWN_ENV):
        install_quit_hook(app, window, opener, started)
    window.show()
    status = int(app.exec())
    window.shutdown()  # the hook quits without closing the window: join the workers either way
    return status
