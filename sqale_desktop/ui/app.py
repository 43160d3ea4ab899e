"""The desktop app's entry point: ``run_app()`` builds the QApplication and the main window.

On first run the window opens the bundled demo shop (generated, not downloaded) and, when no
model is installed, offers the model manager; browsing and SQL work without a model.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from sqale_desktop import __version__
from sqale_desktop.core import settings as settings_mod
from sqale_desktop.ui.main_window import MainWindow
from sqale_desktop.ui.palette import apply_theme


def create_application(argv: Sequence[str] | None = None) -> QApplication:
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(list(argv or sys.argv))
    app.setApplicationName("SQaLe Desktop")
    app.setApplicationVersion(__version__)
    app.setOrganizationName("sqale-desktop")
    return app


def resolve_engine(settings: settings_mod.Settings) -> tuple[Any, str, Any]:
    """Settings -> (engine factory or None, description, episode function) for the window."""
    from sqale_desktop.ui.engine_choice import engine_choice
    from sqale_desktop.ui.episodes import default_episode_fn

    choice = engine_choice(settings)
    return choice.factory, choice.description, default_episode_fn(settings, choice.protocol)


def build_main_window(first_run_offer: bool = True) -> MainWindow:
    """The main window on the demo database, engine from the settings, history restored."""
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
    factory, description, episode_fn = resolve_engine(settings)
    window = MainWindow(settings, factory, episode_fn, history=history, resolve_engine=resolve_engine)
    window.set_engine_factory(factory, description)
    if loaded.note:
        window.show_error(loaded.note)
    if history_error:
        window.show_error(f"Conversation history unavailable: {history_error}")
    window.open_demo()
    if factory is not None:
        window.runner.load_engine()  # in the background, so the first question does not wait for it
    if factory is None and first_run_offer:
        QTimer.singleShot(300, window.offer_model_download)
    return window


def run_app(argv: Sequence[str] | None = None) -> int:
    """Start the desktop app; returns the exit status."""
    app = create_application(argv)
    window = build_main_window()
    window.show()
    return int(app.exec())
