"""Conversations alone: a page gets its stored conversation back; clearing and deleting forget it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QWidget

from sqale_desktop.core.agent.events import Episode
from sqale_desktop.core.db.connection import open_readonly
from sqale_desktop.core.db.introspect import cached_schema
from sqale_desktop.core.history import History
from sqale_desktop.ui.conversations import Conversations
from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.workers import TaskPool


def make_page(qtbot: Any, window: QWidget, pool: TaskPool, path: Path) -> DatabasePage:
    db = open_readonly(path, time_limit_s=5.0)
    page = DatabasePage(db, cached_schema(db), pool, window)
    qtbot.addWidget(page)
    return page


def close(page: DatabasePage, pool: TaskPool) -> None:
    page.close_database()
    assert pool.shutdown()
    page.release()


def test_a_page_gets_back_its_episodes_query_runs_and_last_sql(
    qtbot: Any, chinook: Path, tmp_path: Path
) -> None:
    history = History(tmp_path / "h.sqlite")
    conversation = history.conversation_for(chinook.resolve(), title=chinook.name)
    entry = history.add_question(conversation.id, "How many genres?")
    history.finish_episode(
        entry, Episode(question="How many genres?", db=str(chinook), sql="SELECT 25", ended_by="submit_sql")
    )
    history.add_question(conversation.id, "Interrupted?")  # the app closed while it ran
    history.add_rerun(conversation.id, "SELECT 1", row_count=1, duration_ms=3)
    window = QWidget()
    qtbot.addWidget(window)
    pool = TaskPool(max_threads=2, parent=window)
    page = make_page(qtbot, window, pool, chinook)
    conversations = Conversations(history, window, lambda: [page])
    errors: list[str] = []
    conversations.error.connect(errors.append)
    try:
        conversations.restore(page)
        assert errors == [] and page.conversation_id == conversation.id
        assert [view.episode.question for view in page.chat.episodes] == ["How many genres?", "Interrupted?"]
        assert page.chat.episodes[1].episode.ended_by == "error"
        assert [run.sql for run in page.sql.history.shown_runs()] == ["SELECT 1"]  # only the hand-run SQL
        assert page.sql.editor.sql() == "SELECT 1"  # where the user left off

        conversations.record_rerun(page, "SELECT 2", 1, None, 4)
        assert page.sql.history.shown_runs()[0].sql == "SELECT 2"
        assert [e.sql for e in history.entries(conversation.id) if e.kind == "rerun"] == [
            "SELECT 1",
            "SELECT 2",
        ]

        messages: list[str] = []
        conversations.message.connect(messages.append)
        assert conversations.clear(page, confirm=False)
        assert messages == [f"Cleared the conversation about {chinook.name}."]
        assert page.chat.episodes == [] and page.sql.history.shown_runs() == []
        assert page.conversation_id is not None and history.entries(page.conversation_id) == []
        assert [c.title for c in history.list_conversations()] == [chinook.name]  # a fresh, empty one
        assert not conversations.clear(None, confirm=False)  # no tab: nothing to clear
    finally:
        close(page, pool)


def test_a_conversation_deleted_elsewhere_empties_its_open_tab_only(
    qtbot: Any, chinook: Path, northwind: Path, tmp_path: Path
) -> None:
    history = History(tmp_path / "h.sqlite")
    window = QWidget()
    qtbot.addWidget(window)
    pool = TaskPool(max_threads=2, parent=window)
    first, second = make_page(qtbot, window, pool, chinook), make_page(qtbot, window, pool, northwind)
    conversations = Conversations(history, window, lambda: [first, second])
    try:
        for page in (first, second):
            conversations.restore(page)
            conversations.record_rerun(page, "SELECT 1", 1, None, 1)
        assert first.conversation_id is not None
        deleted = first.conversation_id
        history.delete_conversation(deleted)
        conversations.conversation_deleted(deleted)
        assert first.sql.history.shown_runs() == []
        assert first.conversation_id is not None and history.entries(first.conversation_id) == []
        assert [run.sql for run in second.sql.history.shown_runs()] == ["SELECT 1"]
    finally:
        first.close_database()
        close(second, pool)
        first.release()


def test_without_a_history_nothing_is_restored_or_kept(qtbot: Any, chinook: Path) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    pool = TaskPool(max_threads=2, parent=window)
    page = make_page(qtbot, window, pool, chinook)
    conversations = Conversations(None, window, lambda: [page])
    try:
        conversations.restore(page)
        assert page.conversation_id is None
        conversations.record_rerun(page, "SELECT 1", 1, None, 1)
        assert [run.sql for run in page.sql.history.shown_runs()] == ["SELECT 1"]  # listed, not stored
        conversations.show_dialog()  # no store: no dialog to block the test
    finally:
        close(page, pool)


def test_the_stored_conversations_dialog_opens_one(
    qtbot: Any, chinook: Path, northwind: Path, tmp_path: Path
) -> None:
    """Issue 20, item 15: pick a conversation, click Open (or double-click): its database is asked for."""
    from PySide6.QtCore import Qt

    from sqale_desktop.ui.conversations_dialog import ConversationsDialog

    history = History(tmp_path / "h.sqlite")
    for path in (chinook, northwind):
        history.conversation_for(path.resolve(), title=path.name)
    dialog = ConversationsDialog(history)
    qtbot.addWidget(dialog)
    dialog.show()
    assert not dialog.open_button.isEnabled()  # nothing picked yet
    item = dialog.list.findItems("northwind.sqlite", Qt.MatchFlag.MatchStartsWith)[0]
    rect = dialog.list.visualItemRect(item)
    qtbot.mouseClick(dialog.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert dialog.open_button.isEnabled()
    with qtbot.waitSignal(dialog.open_requested, timeout=1_000) as opened:
        qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    assert opened.args == [str(northwind.resolve())]
    assert dialog.result() == dialog.DialogCode.Accepted


def test_a_data_file_keeps_its_conversation_under_itself_and_an_old_one_is_found(
    qtbot: Any, tmp_path: Path
) -> None:
    """Issue 32, item 5: a CSV's page stores its conversation under the CSV, titled after it; one
    an older version kept under the cache copy's path comes back on that page, and Stored
    Conversations… names the CSV and asks to open the CSV, not `….csv.sqlite`."""
    from PySide6.QtCore import Qt

    from sqale_desktop.core.imports import import_source
    from sqale_desktop.ui.conversations_dialog import ConversationsDialog

    source = tmp_path / "orders.csv"
    source.write_text("id,total\n1,9.5\n2,3.25\n", encoding="utf-8")
    other = tmp_path / "refunds.csv"
    other.write_text("id,amount\n1,2\n", encoding="utf-8")
    history = History(tmp_path / "h.sqlite")
    imported, old = import_source(source), import_source(other)
    # An older version's conversation about refunds.csv, kept under the copy's path and title.
    legacy = history.conversation_for(old.db_path, title=old.db_path.name)
    history.add_rerun(legacy.id, "SELECT 1", row_count=1, error=None, duration_ms=1)
    pool = TaskPool(max_threads=2)
    window = QWidget()
    qtbot.addWidget(window)
    pages = []
    for result in (imported, old):
        db = open_readonly(result.db_path, time_limit_s=5.0)
        page = DatabasePage(db, cached_schema(db), pool, window, source=result.source)
        qtbot.addWidget(page)
        pages.append(page)
    conversations = Conversations(history, window, lambda: pages)
    try:
        for page in pages:
            conversations.restore(page)
        mine = history.conversation_for(source)
        assert pages[0].conversation_id == mine.id and mine.title == "orders.csv"
        assert mine.db_path == str(source.resolve())
        assert pages[1].conversation_id == legacy.id  # the old one, not a new empty one
        assert [run.database for run in pages[1].sql.history.shown_runs()] == ["refunds.csv"]
        dialog = ConversationsDialog(history)
        qtbot.addWidget(dialog)
        dialog.show()
        texts = [dialog.list.item(i).text().split("  —  ")[0] for i in range(dialog.list.count())]
        assert sorted(texts) == ["orders.csv", "refunds.csv"]
        item = dialog.list.findItems("refunds.csv", Qt.MatchFlag.MatchStartsWith)[0]
        assert item.toolTip() == str(other.resolve())
        qtbot.mouseClick(
            dialog.list.viewport(), Qt.MouseButton.LeftButton, pos=dialog.list.visualItemRect(item).center()
        )
        with qtbot.waitSignal(dialog.open_requested, timeout=1_000) as opened:
            qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
        assert opened.args == [str(other.resolve())]
    finally:
        for page in pages:
            page.close_database()
        assert pool.shutdown()
        for page in pages:
            page.release()
