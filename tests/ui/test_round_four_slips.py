"""Issue 32's smaller slips, met the way a person meets them: in the real window, by key and menu."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence

from tests.ui.windows import WindowFactory, open_page


def test_copy_sql_on_an_empty_editor_copies_nothing_and_says_so(
    qtbot: Any, make_window: WindowFactory, chinook: Path
) -> None:
    window = make_window()
    page = open_page(qtbot, window, chinook)
    page.sql.editor.set_sql("")
    QGuiApplication.clipboard().setText("what the person copied before")
    page.sql.editor.setFocus()
    qtbot.keyClick(
        page.sql.editor, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    assert QGuiApplication.clipboard().text() == "what the person copied before"
    assert page.sql.message.text() == "Nothing to copy: the editor is empty."

    page.sql.editor.set_sql("SELECT 1")
    qtbot.keyClick(
        page.sql.editor, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    assert QGuiApplication.clipboard().text() == "SELECT 1"
    assert page.sql.message.text() == "SQL copied to the clipboard."


def test_tools_stop_shows_esc_and_esc_stops_a_running_query(
    qtbot: Any, make_window: WindowFactory, chinook: Path
) -> None:
    window = make_window()
    page = open_page(qtbot, window, chinook)
    tools = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Tools")
    stop = window.findChild(QAction, "stop")
    assert stop is not None and stop in tools.actions()
    assert stop.shortcut() == QKeySequence(Qt.Key.Key_Escape)  # what the menu draws beside "Stop"

    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    with qtbot.waitSignal(page.sql.query_failed, timeout=8_000) as blocker:
        page.sql.run(endless)
        assert page.sql.running
        page.sql.editor.setFocus()
        qtbot.keyClick(page.sql.editor, Qt.Key.Key_Escape)
    assert "cancelled" in blocker.args[0]
