"""Help → Show Log Folder opens the folder holding the app's log file (issue 11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QAction, QDesktopServices

from sqale_desktop.core import paths
from sqale_desktop.core.history import History
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.main_window import MainWindow


def test_help_menu_opens_the_log_folder(qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    window = MainWindow(Settings(), None, history=History(tmp_path / "history.sqlite"))
    qtbot.addWidget(window)
    menus = {a.text(): a.menu() for a in window.menuBar().actions()}
    assert "&Help" in menus
    action = window.findChild(QAction, "show_log_folder")
    assert action is not None and action in menus["&Help"].actions()
    action.trigger()
    assert [Path(u.toLocalFile()) for u in opened] == [paths.log_dir()]
    assert window.shutdown()
