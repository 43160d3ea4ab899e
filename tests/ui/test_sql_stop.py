"""A statement run by hand can be stopped as a person would: the Run button turns into Stop while it
runs (mouse), Esc does the same (keyboard, named in Stop's tooltip), and the query history lists
the stopped run as "cancelled", also after a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from sqale_desktop.core.history import History
from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.main_window import MainWindow
from tests.ui.windows import WindowFactory, open_page

ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def history_rows(page: DatabasePage) -> list[tuple[str, str]]:
    """What the Query history tab shows: (query, rows column), newest first."""
    view = page.sql.history.view
    model = view.model()
    return [(model.index(r, 1).data(), model.index(r, 2).data()) for r in range(model.rowCount())]


def start_endless(qtbot: Any, page: DatabasePage) -> None:
    page.sql.editor.set_sql(ENDLESS)
    qtbot.mouseClick(page.sql.run_button, Qt.MouseButton.LeftButton)
    assert page.sql.running


def test_run_becomes_stop_and_a_click_on_stop_cancels(
    qtbot: Any, make_window: WindowFactory, chinook: Path, tmp_path: Path
) -> None:
    store = tmp_path / "history.sqlite"
    window = make_window(history=History(store))
    page = open_page(qtbot, window, chinook)
    sql = page.sql
    assert sql.run_button.isVisible() and not sql.stop_button.isVisible()
    with qtbot.waitSignal(sql.user_ran, timeout=10_000) as ran:
        start_endless(qtbot, page)
        assert sql.stop_button.isVisible() and sql.stop_button.isEnabled()
        assert not sql.run_button.isVisible()
        assert sql.stop_button.toolTip() == "Stop the running statement (Esc)"
        qtbot.mouseClick(sql.stop_button, Qt.MouseButton.LeftButton)
    assert ran.args[0] == ENDLESS and ran.args[1] is None and ran.args[2] == "the query was cancelled"
    assert sql.run_button.isVisible() and not sql.stop_button.isVisible()
    assert sql.message.text().startswith("Stopped: the query was cancelled after ")
    assert "⚠" not in sql.message.text()
    assert history_rows(page) == [(ENDLESS, "cancelled")]

    # A statement that fails is still an error, next to the cancelled one.
    with qtbot.waitSignal(sql.user_ran, timeout=10_000):
        sql.editor.set_sql("SELECT nope FROM Genre")
        qtbot.mouseClick(sql.run_button, Qt.MouseButton.LeftButton)
    assert history_rows(page) == [("SELECT nope FROM Genre", "⚠ error"), (ENDLESS, "cancelled")]
    assert window.shutdown()
    window.close()

    again: MainWindow = make_window(history=History(store))
    restored = open_page(qtbot, again, chinook)
    assert history_rows(restored) == [("SELECT nope FROM Genre", "⚠ error"), (ENDLESS, "cancelled")]


def test_esc_stops_a_hand_run_statement(qtbot: Any, make_window: WindowFactory, chinook: Path) -> None:
    window = make_window()
    page = open_page(qtbot, window, chinook)
    with qtbot.waitSignal(page.sql.query_failed, timeout=10_000) as failed:
        page.sql.editor.set_sql(ENDLESS)
        page.sql.editor.setFocus()
        qtbot.keyClick(page.sql.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        assert page.sql.stop_button.isVisible()
        qtbot.keyClick(page.sql.editor, Qt.Key.Key_Escape)
    assert "cancelled" in failed.args[0]
    assert page.sql.run_button.isVisible() and not page.sql.stop_button.isVisible()
    assert history_rows(page) == [(ENDLESS, "cancelled")]


def test_one_row_is_one_row(qtbot: Any, make_window: WindowFactory, chinook: Path) -> None:
    window = make_window()
    page = open_page(qtbot, window, chinook)
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        page.sql.editor.set_sql("SELECT Name FROM Genre WHERE GenreId = 1")
        qtbot.mouseClick(page.sql.run_button, Qt.MouseButton.LeftButton)
    assert page.sql.message.text().startswith("1 row · ")
    assert history_rows(page)[0][1] == "1 row"
