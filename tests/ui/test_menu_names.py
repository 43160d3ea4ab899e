"""One name for the model manager everywhere: the menu, the messages and the README (issue 20, item 10)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from PySide6.QtGui import QAction

from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.main_window import MainWindow

REPO = Path(__file__).resolve().parents[2]


def test_every_mention_names_the_menu_entry_that_exists(qtbot: Any) -> None:
    window = MainWindow(Settings(), None)
    qtbot.addWidget(window)
    action = window.findChild(QAction, "model_manager")
    assert action is not None
    menu = next(a.text() for a in window.menuBar().actions() if a.menu() and action in a.menu().actions())
    path = f"{menu.replace('&', '')} → {action.text().replace('&', '')}"
    assert path == "Tools → Model Manager…"
    texts = [REPO / "README.md", *sorted((REPO / "sqale_desktop").rglob("*.py"))]
    # A menu path that leads to the models: "<Menu> → <entry>" naming Models or Model manager.
    mention = re.compile(r"\b\w+ → Models?(?: [Mm]anager)?…?")
    found = {m.group(0) for text in texts for m in mention.finditer(text.read_text(encoding="utf-8"))}
    assert found == {path}, found
    assert path in (REPO / "README.md").read_text(encoding="utf-8")
    assert path in window.status.model_label.toolTip()
    assert window.shutdown()
