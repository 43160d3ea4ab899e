"""Tabs behave like tabs: their own banners, the running tab marked busy, Stop and Esc acting only
on the tab whose episode runs, a failed query marking the old grid stale, tabs back on restart."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from sqale_desktop.core import settings as settings_mod
from sqale_desktop.core.history import History
from sqale_desktop.core.models.catalog import LARGE_SCHEMA_TABLES
from sqale_desktop.ui.main_window import MainWindow
from tests.helpers import shared_data
from tests.ui.replay_scripts import chinook_script
from tests.ui.windows import WindowFactory, ask, open_page, settle


def test_banners_belong_to_their_tab(
    qtbot: Any, make_window: WindowFactory, chinook: Path, artifacts: Path
) -> None:
    window = make_window()
    corrupt = open_page(qtbot, window, shared_data("awkward/anki_corrupt_diskfull.anki2"))
    qtbot.waitUntil(lambda: "damaged" in corrupt.banners.texts(), timeout=10_000)
    large = open_page(qtbot, window, shared_data("awkward/ios__powerlog_84E2141B.PLSQL.sqlite"))
    assert len(large.schema_model.countable_tables()) >= LARGE_SCHEMA_TABLES
    hint = large.banners.texts()["large_schema"]
    assert "M_SQaLe" in hint and "tables" in hint
    small = open_page(qtbot, window, chinook)
    assert small.banners.texts() == {}  # nothing from the other tabs leaks onto this one
    assert "damaged" not in large.banners.texts() and "large_schema" not in corrupt.banners.texts()
    # A file that does not open is the window's business, and it replaces no tab's warning.
    readme = Path(chinook).parent / "README.md"
    with qtbot.waitSignal(window.open_failed, timeout=10_000):
        window.open_database(readme if readme.exists() else Path(chinook).with_suffix(".missing"))
    assert "damaged" in corrupt.banners.texts()
    window.tabs.setCurrentWidget(corrupt)
    window.resize(1024, 700)
    settle()
    assert corrupt.banners.isVisible() and not small.banners.isVisible()
    banner = corrupt.banners.banner("damaged")
    assert banner is not None
    assert banner.height() <= banner.sizeHint().height() + 2  # as tall as its text, no taller
    window.grab().save(str(artifacts / "tabs_banner.png"))


def test_the_running_tab_is_busy_and_only_it_can_be_stopped(
    qtbot: Any, make_window: WindowFactory, chinook: Path, northwind: Path, artifacts: Path
) -> None:
    window = make_window(chinook_script(thinking_words=300), delay=0.02)
    first = open_page(qtbot, window, chinook)
    second = open_page(qtbot, window, northwind)
    window.tabs.setCurrentWidget(first)
    view = ask(qtbot, window, first)
    assert window.tabs.tabText(window.tabs.indexOf(first)).startswith("● ")
    assert not window.tabs.tabText(window.tabs.indexOf(second)).startswith("● ")
    assert first.chat.stop_button.isEnabled() and not second.chat.stop_button.isEnabled()
    assert not second.chat.ask_button.isEnabled()
    assert "the agent is answering in chinook.sqlite" in second.chat.live.text()
    assert "chinook.sqlite" in second.chat.ask_button.toolTip()

    # Esc and Stop on the other tab leave the episode running and say where it runs.
    window.tabs.setCurrentWidget(second)
    qtbot.keyClick(window, Qt.Key.Key_Escape)
    window.stop(second)
    assert view.running and window.running_page() is first
    assert "Stop (or Esc) on that tab" in window.status.message_label.text()
    window.resize(1024, 700)
    settle()
    assert window.width() == 1024  # no message widens the window past the size asked for
    window.grab().save(str(artifacts / "tabs_busy_other_tab.png"))

    window.tabs.setCurrentWidget(first)
    with qtbot.waitSignal(window.episode_finished, timeout=10_000) as blocker:
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    assert blocker.args[0].ended_by == "cancelled"
    assert not window.tabs.tabText(window.tabs.indexOf(first)).startswith("● ")
    assert second.chat.ask_button.isEnabled() and second.chat.live.text() == ""


def test_a_failed_query_marks_the_previous_grid_stale(
    qtbot: Any, make_window: WindowFactory, chinook: Path
) -> None:
    window = make_window()
    page = open_page(qtbot, window, chinook)
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        page.sql.run("SELECT Name FROM Genre")
    assert not page.grid_stale and page.sql.grid.isEnabled()
    with qtbot.waitSignal(page.sql.query_failed, timeout=10_000):
        page.sql.run("SELECT nope FROM Genre")
    assert page.grid_stale and not page.sql.grid.isEnabled()
    assert "previous result" in page.sql.message.text() and "nope" in page.sql.message.text()
    assert "Previous result" in page.sql.grid.toolTip()
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        page.sql.run("SELECT GenreId FROM Genre")
    assert not page.grid_stale and page.sql.grid.toolTip() == ""


def test_open_tabs_come_back_on_restart(qtbot: Any, tmp_path: Path, chinook: Path, northwind: Path) -> None:
    copy = tmp_path / "mine.sqlite"
    with sqlite3.connect(copy) as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    settings = settings_mod.load().settings
    window = MainWindow(settings, None, history=History(tmp_path / "h.sqlite"))
    qtbot.addWidget(window)
    for path in (chinook, copy):
        open_page(qtbot, window, path)
    open_page(qtbot, window, northwind)
    window.databases.close_tab(window.tabs.indexOf(window.pages()[-1]))  # closed tabs do not come back
    assert window.shutdown()
    saved = settings_mod.load().settings.open_databases
    assert saved == [str(chinook), str(copy)]

    again = MainWindow(settings_mod.load().settings, None, history=History(tmp_path / "h.sqlite"))
    qtbot.addWidget(again)
    try:
        again.restore_tabs()
        qtbot.waitUntil(lambda: len(again.pages()) == 2, timeout=10_000)
        assert sorted(p.path.name for p in again.pages()) == ["chinook.sqlite", "mine.sqlite"]
    finally:
        assert again.shutdown()
