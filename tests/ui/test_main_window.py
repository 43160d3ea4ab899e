"""The real window driven with the replay engine over real databases from ../shared/data."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from sqale_desktop.core.export_formats import platform_newline
from sqale_desktop.core.history import History
from sqale_desktop.ui.sql_highlight import format_sql
from tests.ui.replay_scripts import CHINOOK_ANSWER_SQL
from tests.ui.windows import WindowFactory, grid_rows, open_page


def test_ask_streams_tool_cards_then_answers_with_the_sqlite_result(
    qtbot: Any, make_window: WindowFactory, chinook: Path, artifacts: Path
) -> None:
    window = make_window(delay=0.01)
    page = open_page(qtbot, window, chinook)
    qtbot.waitUntil(lambda: page.schema_model.row_count_text("Track") is not None, timeout=10_000)
    assert page.schema_model.row_count_text("Track") == "3,503 rows"
    window.grab().save(str(artifacts / "empty.png"))

    page.chat.question.setPlainText("Which artists have the most albums?")
    with qtbot.waitSignal(window.episode_finished, timeout=20_000) as blocker:
        page.chat.ask_button.click()
        view = page.chat.current
        assert view is not None
        # Tool cards appear while the episode is still streaming, not only at the end.
        qtbot.waitUntil(lambda: len(view.tool_cards()) >= 2, timeout=10_000)
        assert view.running and page.chat.current is view
        assert page.chat.stop_button.isEnabled()
        window.grab().save(str(artifacts / "streaming.png"))
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
    from tests.helpers import shared_data

    window = make_window()
    text_file = tmp_path / "notes.txt"
    text_file.write_text("this is not a database\n" * 10)
    with qtbot.waitSignal(window.open_failed, timeout=10_000) as blocker:
        window.open_database(text_file)
    assert "not a SQLite database" in blocker.args[0]
    assert window.banner.isVisible() and "notes.txt" in window.banner.text()

    with qtbot.waitSignal(window.open_failed, timeout=10_000) as blocker:
        window.open_database(tmp_path / "missing.sqlite")
    assert "no such file" in blocker.args[0]
    assert window.pages() == []

    # This file's schema reads fine; the damage is further in, and the window says so.
    corrupt = shared_data("awkward/anki_corrupt_diskfull.anki2")
    # The page starts its integrity check as it opens, so the warning may come before any wait
    # could be entered on the page's ``damaged``: wait for what it shows instead.
    page = open_page(qtbot, window, corrupt)
    qtbot.waitUntil(lambda: "damaged" in page.banners.texts().get("damaged", ""), timeout=10_000)
    warning = page.banners.texts()["damaged"]
    assert "damaged" in warning and "anki_corrupt_diskfull.anki2" in warning
    # The warning belongs to the damaged file's tab, next to (not instead of) other messages.
    assert "damaged" not in window.banner.text()
    window.grab().save(str(artifacts / "error.png"))


def test_stop_mid_episode_leaves_the_app_ready(qtbot: Any, make_window: WindowFactory, chinook: Path) -> None:
    window = make_window(delay=0.02)
    page = open_page(qtbot, window, chinook)
    page.chat.question.setPlainText("Which artists have the most albums?")
    page.chat.ask_button.click()
    view = page.chat.current
    assert view is not None
    qtbot.waitUntil(lambda: len(view.tool_cards()) >= 1, timeout=10_000)
    with qtbot.waitSignal(window.episode_finished, timeout=10_000) as blocker:
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    assert blocker.args[0].ended_by == "cancelled"
    assert view.answer is not None and view.answer.ended_by == "cancelled"
    assert not view.running
    assert page.chat.ask_button.isEnabled() and not page.chat.stop_button.isEnabled()
    assert len(view.tool_cards()) < 5  # it did stop before the end of the script


def test_stop_cancels_a_running_query(qtbot: Any, make_window: WindowFactory, chinook: Path) -> None:
    window = make_window()
    page = open_page(qtbot, window, chinook)
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    with qtbot.waitSignal(page.sql.query_failed, timeout=8_000) as blocker:
        page.sql.run(endless)
        assert page.sql.running
        window.stop()
    assert "cancelled" in blocker.args[0]
    assert page.sql.run_button.isEnabled()


def test_edit_and_rerun_copy_and_export(
    qtbot: Any, make_window: WindowFactory, chinook: Path, tmp_path: Path
) -> None:
    window = make_window()
    page = open_page(qtbot, window, chinook)
    sql = "SELECT GenreId, Name FROM Genre ORDER BY GenreId"
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        page.sql.run(sql)
    expected = sqlite3.connect(chinook).execute(sql).fetchall()
    assert grid_rows(page) == expected

    edited = "SELECT GenreId, Name FROM Genre WHERE GenreId > 20 ORDER BY Name"
    page.sql.editor.set_sql(edited)
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        qtbot.keyClick(page.sql.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert grid_rows(page) == sqlite3.connect(chinook).execute(edited).fetchall()

    page.sql.editor.setFocus()
    qtbot.keyClick(
        page.sql.editor, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    assert QGuiApplication.clipboard().text() == edited

    page.sql.grid.setFocus()
    page.sql.grid.selectAll()
    QGuiApplication.clipboard().clear()
    qtbot.keyClick(page.sql.grid, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    text = QGuiApplication.clipboard().text()
    assert text == page.sql.grid.copy_selection()
    lines = text.split(platform_newline())  # the cells, as a spreadsheet copies them: no header
    assert lines == [f"{gid}\t{name}" for gid, name in sqlite3.connect(chinook).execute(edited)]

    target = tmp_path / "genres.csv"
    with qtbot.waitSignal(page.sql.export_finished, timeout=10_000) as blocker:
        page.sql.export(target, "csv")
    assert blocker.args == [str(target), 5]
    with target.open(newline="", encoding="utf-8") as handle:
        back = list(csv.reader(handle))
    assert back[0] == ["GenreId", "Name"]
    assert [(int(a), b) for a, b in back[1:]] == sqlite3.connect(chinook).execute(edited).fetchall()

    as_json = tmp_path / "genres.json"
    with qtbot.waitSignal(page.sql.export_finished, timeout=10_000):
        page.sql.export(as_json, "json")
    records = json.loads(as_json.read_text(encoding="utf-8"))
    assert [(r["GenreId"], r["Name"]) for r in records] == sqlite3.connect(chinook).execute(edited).fetchall()


def test_writing_sql_is_refused_with_the_reason(
    qtbot: Any, make_window: WindowFactory, chinook: Path
) -> None:
    window = make_window()
    page = open_page(qtbot, window, chinook)
    with qtbot.waitSignal(page.sql.query_failed, timeout=10_000) as blocker:
        page.sql.run("DELETE FROM Artist")
    assert "read-only" in blocker.args[0] and "DELETE" in blocker.args[0]
    assert "read-only" in page.sql.message.text()
    assert sqlite3.connect(chinook).execute("SELECT count(*) FROM Artist").fetchone()[0] == 275


def test_reask_and_restart_restores_the_conversation(
    qtbot: Any, make_window: WindowFactory, chinook: Path, tmp_path: Path
) -> None:
    store = tmp_path / "history.sqlite"
    window = make_window(history=History(store))
    page = open_page(qtbot, window, chinook)
    page.chat.question.setPlainText("Which artists have the most albums?")
    with (
        qtbot.waitSignal(page.sql.query_finished, timeout=10_000),  # then its answer runs in the grid
        qtbot.waitSignal(window.episode_finished, timeout=20_000),  # waited for first (exits first)
    ):
        page.chat.ask_button.click()
    first = page.chat.episodes[0]
    first.reask_button.click()
    assert page.chat.question.toPlainText() == "Which artists have the most albums?"
    page.chat.question.setPlainText("Which five artists have the most albums?")
    with (
        qtbot.waitSignal(page.sql.query_finished, timeout=10_000),
        qtbot.waitSignal(window.episode_finished, timeout=20_000),
    ):
        qtbot.keyClick(page.chat.question, Qt.Key.Key_Return)
    assert [e.question for e in page.chat.episodes] == [
        "Which artists have the most albums?",
        "Which five artists have the most albums?",
    ]
    edited = "SELECT Name FROM Artist WHERE Name LIKE 'Iron%'"
    with qtbot.waitSignal(page.sql.user_ran, timeout=10_000) as ran:
        page.sql.editor.set_sql(edited)
        page.sql.run_button.click()
    assert ran.args[:3] == [edited, 1, None] and ran.args[3] >= 0  # and its milliseconds
    # Hand-run SQL goes to the query history, not into the chat as a card.
    assert page.chat.reruns == []
    assert [run.sql for run in page.sql.history.shown_runs()] == [edited]
    assert window.shutdown()
    window.close()

    again = make_window(history=History(store))
    restored = open_page(qtbot, again, chinook)
    views = restored.chat.episodes
    assert [v.question for v in views] == [
        "Which artists have the most albums?",
        "Which five artists have the most albums?",
    ]
    assert restored.chat.reruns == []
    [run] = restored.sql.history.shown_runs()
    assert (run.sql, run.row_count, run.database) == (edited, 1, chinook.name)
    assert run.duration_ms is not None and run.entry_id is not None
    assert restored.sql.editor.sql() == format_sql(edited)  # where the user left off, formatted
    assert views[0].answer is not None and "SELECT" in views[0].answer.sql
    assert views[0].ended_by == "submit_sql"
    assert [c.tool for c in views[0].tool_cards()] == [
        "list_tables",
        "describe_table",
        "join_path",
        "run_query",
        "submit_sql",
    ]


def test_without_a_model_browsing_and_sql_still_work(
    qtbot: Any, make_window: WindowFactory, chinook: Path
) -> None:
    window = make_window(script=[])
    page = open_page(qtbot, window, chinook)
    assert not page.chat.ask_button.isEnabled()
    assert "No model" in page.chat.live.text()
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        page.sql.run("SELECT count(*) FROM Track")
    assert grid_rows(page) == [(3503,)]


def test_recent_list_is_persisted_and_reopens(qtbot: Any, make_window: WindowFactory, chinook: Path) -> None:
    from sqale_desktop.core import settings as settings_mod
    from sqale_desktop.core.db.errors import DatabaseUnreadable

    window = make_window()
    page = open_page(qtbot, window, chinook)
    assert settings_mod.load().settings.recent_databases == [str(chinook)]
    actions = window.databases.recent_menu.actions()
    assert [a.text() for a in actions] == [str(chinook)]
    window.databases.close_tab(0)
    assert window.pages() == []

    def closed(db: Any) -> bool:
        try:
            db.execute("SELECT 1")
        except DatabaseUnreadable:
            return True
        return False

    # The closed tab's files are released: the page's handle and the grid's.
    qtbot.waitUntil(lambda: closed(page.db) and closed(page.sql.db), timeout=10_000)
    with qtbot.waitSignal(window.database_opened, timeout=10_000):
        actions[0].trigger()
    assert len(window.pages()) == 1


def test_drop_a_file_to_open_it(qtbot: Any, make_window: WindowFactory, northwind: Path) -> None:
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDropEvent

    window = make_window()
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(northwind))])
    event = QDropEvent(
        QPointF(10, 10),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    with qtbot.waitSignal(window.database_opened, timeout=10_000) as blocker:
        window.dropEvent(event)
    page = blocker.args[0]
    assert page.path == northwind
    # Northwind has names with spaces and views: the tree shows both kinds.
    names = page.schema_model.tables()
    assert "Order Details" in names
    assert any("(view)" in page.schema_model.item(i).text() for i in range(len(names)))


def test_sorting_a_partly_loaded_result_reruns_it_ordered(
    qtbot: Any, qtmodeltester: Any, make_window: WindowFactory, chinook: Path
) -> None:
    window = make_window()
    page = open_page(qtbot, window, chinook)
    sql = "SELECT TrackId, Name, Composer FROM Track"
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        page.sql.run(sql)
    model = page.sql.model
    assert model is not None and model.rowCount() == 500 and model.canFetchMore()
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        page.sql.grid.sortByColumn(1, Qt.SortOrder.DescendingOrder)
    assert page.sql.editor.sql() == sql  # the user's SQL is untouched; the sort is the grid's
    expected = sqlite3.connect(chinook).execute(f"SELECT * FROM ({sql}) ORDER BY 2 DESC").fetchall()
    assert grid_rows(page) == expected
    assert page.sql.grid.horizontalHeader().sortIndicatorSection() == 1
    qtmodeltester.check(page.sql.model)
    # A complete result sorts in memory, without another query.
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        page.sql.run("SELECT Name, Composer FROM Track WHERE AlbumId = 1")
    page.sql.grid.sortByColumn(1, Qt.SortOrder.AscendingOrder)
    values = [r[1] for r in grid_rows(page)]
    assert values == sorted(values)


def test_an_episode_cut_short_by_a_crash_is_shown_as_interrupted(
    qtbot: Any, make_window: WindowFactory, chinook: Path, tmp_path: Path
) -> None:
    store = tmp_path / "history.sqlite"
    before = History(store)
    conversation = before.conversation_for(chinook.resolve(), title=chinook.name)
    before.add_question(conversation.id, "How many tracks are there?")  # never finished: the app died
    window = make_window(history=History(store))
    page = open_page(qtbot, window, chinook)
    [view] = page.chat.episodes
    assert view.question == "How many tracks are there?"
    assert view.answer is not None and view.ended_by == "error"
    assert "interrupted" in view.answer.details.text()
    assert page.chat.ask_button.isEnabled()


def test_closing_mid_episode_saves_it_as_stopped(
    qtbot: Any, make_window: WindowFactory, chinook: Path, tmp_path: Path
) -> None:
    store = tmp_path / "history.sqlite"
    window = make_window(delay=0.02, history=History(store))
    page = open_page(qtbot, window, chinook)
    window.ask(page, "Which artists have the most albums?")
    view = page.chat.current
    assert view is not None
    qtbot.waitUntil(lambda: len(view.tool_cards()) >= 1, timeout=10_000)
    window.close()
    assert not window.runner.is_busy() and not window.pool.is_busy()
    [entry] = History(store).entries(page.conversation_id)
    assert entry.state == "finished" and entry.ended_by == "cancelled"


def test_the_context_figure_is_out_of_the_context_the_engine_got(
    qtbot: Any, make_window: WindowFactory, chinook: Path
) -> None:
    from sqale_desktop.core.models.gguf_info import GgufInfo

    window = make_window()
    assert window.settings.n_ctx == 16384
    # The model's header (read on the pool at start) says it was trained for 8,192 tokens.
    info = GgufInfo("m.gguf", "qwen35", "M_SQaLe", "gpt2", "qwen35", True, 8192, 24)
    window.model_advice.show_info(info, None, window.settings.n_ctx)
    assert "the engine is given 8,192" in window.model_banners.texts()["context"]
    page = open_page(qtbot, window, chinook)
    page.chat.question.setPlainText("Which artists have the most albums?")
    with qtbot.waitSignal(window.episode_finished, timeout=20_000):
        qtbot.mouseClick(page.chat.ask_button, Qt.MouseButton.LeftButton)
    text = window.status.context_label.text()
    assert text.startswith("context ") and text.endswith(" / 8,192 tokens"), text
