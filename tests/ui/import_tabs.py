"""The tab bar of data files on its own (``DatabaseTabs`` over a pool), for the import UI tests;
their fixtures (``tabs``, ``held_import``) are in ``conftest.py``."""

from __future__ import annotations

import threading
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QTabWidget, QWidget

from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.database_tabs import DatabaseTabs
from sqale_desktop.ui.workers import TaskPool


class Tabs:
    def __init__(self, qtbot: Any) -> None:
        self.window = QWidget()
        qtbot.addWidget(self.window)
        self.widget = QTabWidget(self.window)
        self.pool = TaskPool(max_threads=2, parent=self.window)
        self.settings = Settings()
        self.tabs = DatabaseTabs(
            self.window,
            self.widget,
            QLabel("empty", self.window),
            self.pool,
            lambda: self.settings,
            lambda: None,
        )
        self.messages: list[str] = []
        self.tabs.message.connect(self.messages.append)


def stop_by_mouse(qtbot: Any, tabs: Tabs, importing: Any, held_import: threading.Event) -> None:
    """Click the importing tab's Stop while the import is held, release it, and check what a
    person sees: the tab gone, and the message that nothing was kept."""
    with qtbot.waitSignal(tabs.tabs.open_failed, timeout=30_000) as failed:
        qtbot.mouseClick(importing.stop_button, Qt.MouseButton.LeftButton)
        held_import.set()
    assert "stopped; nothing was kept" in failed.args[0]
    assert tabs.widget.count() == 0
