"""The history's follow-up threads: parents recorded, the schema migrated, bad threads refused."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

import pytest

from sqale_desktop.core import history
from sqale_desktop.core.agent.events import Episode
from sqale_desktop.core.agent.followup import ThreadError
from sqale_desktop.core.history import History, fingerprint

PROMPT = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>"


def answered(store: History, db: Path, question: str, parent: int | None = None, model: str = "m") -> int:
    conversation = store.conversation_for(db)
    entry = store.add_question(
        conversation.id, question, parent_entry_id=parent, db_fingerprint=fingerprint(db), model=model
    )
    episode = Episode(question=question, db=str(db), sql="SELECT 1", ended_by="submit_sql", prompt=PROMPT)
    store.finish_episode(entry, episode)
    return entry


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE t (x)")
    return path


def test_a_follow_up_records_its_parent_and_the_thread_comes_back(db: Path) -> None:
    store = History()
    first = answered(store, db, "First?")
    second = answered(store, db, "Second?", parent=first)
    assert store.entry(second).parent_entry_id == first
    assert store.entry(first).parent_entry_id is None
    thread = store.thread(second, db, "m")
    assert thread.prompt == PROMPT and thread.questions == ("Second?",)
    last = store.last_answer(db)
    assert last is not None and last.id == second


def test_the_migration_adds_the_thread_columns_to_an_old_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: Path
) -> None:
    path = tmp_path / "old.sqlite"
    monkeypatch.setattr(history, "MIGRATIONS", history.MIGRATIONS[:3])
    old = History(path)
    conversation = old.conversation_for(db)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        asked = conn.execute(
            "INSERT INTO entries (conversation_id, kind, state, question, created_at) "
            "VALUES (?, 'question', 'finished', 'asked before follow-ups', '2026-01-01T00:00:00+00:00')",
            (conversation.id,),
        ).lastrowid
    assert asked is not None
    monkeypatch.undo()
    upgraded = History(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(history.MIGRATIONS) == 4
    entry = upgraded.entry(asked)
    assert (entry.parent_entry_id, entry.db_fingerprint, entry.model) == (None, None, None)


def test_follow_ups_on_bad_threads_are_refused_with_clear_messages(db: Path, tmp_path: Path) -> None:
    store = History()
    good = answered(store, db, "First?")
    with pytest.raises(ThreadError, match="no episode 999"):
        store.thread(999, db)
    other = tmp_path / "other.sqlite"
    other.write_bytes(db.read_bytes())
    with pytest.raises(ThreadError, match=r"was asked on .*shop\.sqlite, not on .*other\.sqlite"):
        store.thread(good, other)
    with pytest.raises(ThreadError, match="answered by m, not by n"):
        store.thread(good, db, "n")
    info = db.stat()
    os.utime(db, ns=(info.st_atime_ns, info.st_mtime_ns + 5_000_000_000))
    with pytest.raises(ThreadError, match="has changed since episode"):
        store.thread(good, db, "m")
    db.unlink()
    with pytest.raises(ThreadError, match="is gone"):
        store.thread(good, db, "m")


def test_a_damaged_or_unfinished_stored_thread_is_refused(db: Path) -> None:
    store = History()
    conversation = store.conversation_for(db)
    running = store.add_question(conversation.id, "still running")
    with pytest.raises(ThreadError, match="never finished"):
        store.thread(running, db)
    stopped = store.add_question(conversation.id, "stopped")
    store.finish_episode(
        stopped, Episode(question="stopped", db=str(db), ended_by="cancelled", prompt=PROMPT)
    )
    with pytest.raises(ThreadError, match="was stopped"):
        store.thread(stopped, db)
    damaged = answered(store, db, "damaged")
    with contextlib.closing(sqlite3.connect(store.path)) as conn, conn:
        conn.execute("UPDATE entries SET episode_json = '{\"prompt\": 1' WHERE id = ?", (damaged,))
    with pytest.raises(ThreadError, match=r"stored thread of episode \d+ is damaged"):
        store.thread(damaged, db)
    cut = answered(store, db, "cut")
    with contextlib.closing(sqlite3.connect(store.path)) as conn, conn:
        conn.execute(
            "UPDATE entries SET episode_json = json_set(episode_json, '$.prompt', 'half a prompt') "
            "WHERE id = ?",
            (cut,),
        )
    with pytest.raises(ThreadError, match=r"stored thread of episode \d+ is damaged"):
        store.thread(cut, db)
