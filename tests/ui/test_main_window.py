"""The real window driven with the replay engine over real databases from ../shared/data."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.history import History
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.main_window import MainWindow
from tests.ui.replay_scripts import CHINOOK_ANSWER_SQL, chinook_script

WindowFactory = Callable[..., MainWindow]


@pytest.fixture
def make_window(qtbot: Any, tmp_path: Path) -> Iterator[WindowFactory]:
    windows: list[MainWindow] = []

    def make(
        script: list[str] | None = None, delay: float = 0.0, history: History | None = None
    ) -> MainWindow:
        completions = script if script is not None else chinook_script()
        factory = (lambda: ReplayEngine(completions, chunk_chars=6, delay=delay)) if script != [] else None
        window = MainWindow(Settings(), factory, history=history or History(tmp_path / "history.sqlite"))
        qtbot.addWidget(window)
        window.show()
        windows.append(window)
        return window

    yield make
    for window in windows:
        assert window.shutdown()


def open_page(qtbot: Any, window: MainWindow, path: Path) -> DatabasePage:
    with qtbot.waitSignal(window.database_opened, timeout=10_000) as blocker:
        window.open_database(path)
    page = blocker.args[0]
    assert isinstance(page, DatabasePage)
    return page


def grid_rows(page: DatabasePage) -> list[tuple[Any, ...]]:
    model = page.sql.model
    assert model is not None
    while model.canFetchMore():
        model.fetchMore()
    return [
        tuple(model.data(model.index(r, c), Qt.ItemDataRole.UserRole) for c in range(model.columnCount()))
        for r in range(model.rowCount())
    ]


def test_ask_streams_tool_cards_then_answers_with_the_sqlite_result(
    qtbot: Any, make_window: WindowFactory, chinook: Path, artifacts: Path
) -> None:
    window = make_window(delay=0.01)
    page = open_page(qtbot, window, chinook)
    qtbot.waitUntil(lambda: page.schema_model.row_count_text("Track") is not None, timeout=10_000)
    assert page.schema_model.row_count_text("Track") == "3,503 rows"
    window.grab().save(str(artifacts / "empty.png"))

    page.chat.question.setPlainText("Which artists have the most albums?")
    page.chat.ask_button.click()
    view = page.chat.current
    assert view is not None
    # Tool cards appear while the episode is still streaming, not only at the end.
    qtbot.waitUntil(lambda: len(view.tool_cards()) >= 2, timeout=10_000)
    assert view.running and page.chat.current is view
    assert page.chat.stop_button.isEnabled()
    window.grab().save(str(artifacts / "streaming.png"))

    with qtbot.waitSignal(window.episode_finished, timeout=20_000) as blocker:
        pass
    episode = blocker.args[0]
    assert episode.ended_by == "submit_sql"
    assert [c.tool for c in view.tool_cards()] == [
        "list_tables",
        "describe_table",
        "join_path",
        "run_query",
        "submit_sql",
    ]
    assert all(not turn.thinking.expanded for turn in view.turns.values())
    assert view.answer is not None and "SELECT" in view.answer.sql
    qtbot.waitUntil(lambda: page.sql.model is not None and not page.sql.running, timeout=10_000)
    expected = sqlite3.connect(chinook).execute(CHINOOK_ANSWER_SQL).fetchall()
    assert grid_rows(page) == expected
    window.grab().save(str(artifacts / "answer_with_grid.png"))


def test_unreadable_files_give_a_clear_message(
    qtbot: Any, make_window: WindowFactory, tmp_path: Path, artifacts: Path
) -> None:
    from tests.conftest import shared_data

    window = make_window()
    text_file = tmp_path / "notes.txt"
    text_file.write_text("this is not a database\n" * 10)
    with qtbot.waitSignal(window.open_failed, timeout=10_000) as blocker:
        window.open_database(text_file)
    assert "not a SQLite database" in blocker.args[0]
    assert window.banner.isVisible() and "notes.txt" in window.banner_label.text()

    with qtbot.waitSignal(window.open_failed, timeout=10_000) as blocker:
        window.open_database(tmp_path / "missing.sqlite")
    assert "no such file" in blocker.args[0]
    assert window.pages() == []

    # This file's schema reads fine; the damage is further in, and the window says so.
    corrupt = shared_data("awkward/anki_corrupt_diskfull.anki2")
    page = open_page(qtbot, window, corrupt)
    with qtbot.waitSignal(page.damaged, timeout=10_000) as blocker:
        pass
    assert "damaged" in blocker.args[0] and "anki_corrupt_diskfull.anki2" in blocker.args[0]
    qtbot.waitUntil(lambda: "damaged" in window.banner_label.text())
    window.grab().save(str(artifacts / "error.png"))
