"""Hand-run queries stored with the conversations and read back as runs; searching them."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from sqale_desktop.core import history as history_mod
from sqale_desktop.core.history import History
from sqale_desktop.core.query_history import CANCELLED, QueryRun, runs_from_entries, search


def test_runs_keep_duration_rows_and_errors_across_a_reopen(tmp_path: Path) -> None:
    store = tmp_path / "history.sqlite"
    first = History(store)
    conversation = first.conversation_for(tmp_path / "shop.sqlite")
    first.add_question(conversation.id, "How many orders?")
    first.add_rerun(conversation.id, "SELECT count(*) FROM orders", row_count=1, duration_ms=12)
    first.add_rerun(conversation.id, "SELECT nope FROM orders", error="no such column: nope", duration_ms=3)
    first.add_rerun(conversation.id, "SELECT * FROM orders", duration_ms=40)  # more than a page

    again = History(store)
    runs = runs_from_entries(again.entries(conversation.id), tmp_path / "shop.sqlite")
    assert [(r.sql, r.row_count, r.error, r.duration_ms, r.database) for r in runs] == [
        ("SELECT count(*) FROM orders", 1, None, 12, "shop.sqlite"),
        ("SELECT nope FROM orders", None, "no such column: nope", 3, "shop.sqlite"),
        ("SELECT * FROM orders", None, None, 40, "shop.sqlite"),
    ]
    assert [r.status for r in runs] == ["1 row", "error", "more than a page"]
    assert all(r.entry_id is not None and r.ran_at.tzinfo is not None for r in runs)
    again.delete_conversation(conversation.id)
    fresh = again.conversation_for(tmp_path / "shop.sqlite")
    assert runs_from_entries(again.entries(fresh.id), "shop.sqlite") == []


def test_a_stopped_run_reads_cancelled_not_error_after_a_reopen(tmp_path: Path) -> None:
    store = tmp_path / "history.sqlite"
    first = History(store)
    conversation = first.conversation_for(tmp_path / "shop.sqlite")
    first.add_rerun(conversation.id, "SELECT count(*) FROM big", error=CANCELLED, duration_ms=900)
    first.add_rerun(conversation.id, "SELECT nope FROM big", error="no such column: nope", duration_ms=2)
    runs = runs_from_entries(History(store).entries(conversation.id), tmp_path / "shop.sqlite")
    assert [(r.status, r.cancelled) for r in runs] == [("cancelled", True), ("error", False)]
    assert runs[0].matches("cancelled")  # the search finds stopped runs by the word


def test_a_version_1_store_is_migrated_and_keeps_its_reruns(tmp_path: Path) -> None:
    store = tmp_path / "history.sqlite"
    conn = sqlite3.connect(store)
    history_mod._v1(conn)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO conversations VALUES (1, '/x/shop.sqlite', 'shop.sqlite', '2026-01-01T00:00:00+00:00', "
        "'2026-01-01T00:00:00+00:00')"
    )
    conn.execute(
        "INSERT INTO entries (conversation_id, kind, state, sql, row_count, created_at) "
        "VALUES (1, 'rerun', 'finished', 'SELECT 1', 1, '2026-01-01T00:00:00+00:00')"
    )
    conn.commit()
    conn.close()
    store_again = History(store)
    [run] = runs_from_entries(store_again.entries(1), "/x/shop.sqlite")
    assert (run.sql, run.row_count, run.duration_ms) == ("SELECT 1", 1, None)
    with sqlite3.connect(store) as check:
        assert check.execute("PRAGMA user_version").fetchone()[0] == len(history_mod.MIGRATIONS) >= 2


def test_search_matches_every_word_in_sql_error_or_file_name() -> None:
    now = datetime.now(UTC)
    runs = [
        QueryRun("SELECT name FROM Artist", now, "chinook.sqlite"),
        QueryRun("SELECT title FROM Album WHERE ArtistId = 1", now, "chinook.sqlite"),
        QueryRun("SELECT nope", now, "shop.sqlite", error="no such column: nope"),
    ]
    assert search(runs, "artist") == runs[:2]
    assert search(runs, "ALBUM artistid") == [runs[1]]
    assert search(runs, "such column") == [runs[2]]
    assert search(runs, "shop") == [runs[2]]
    assert search(runs, "  ") == runs
    assert search(runs, "artist shop") == []
