"""The conversation store: episode round trips, restarts, crashes, migrations, concurrent writers."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from sqale_desktop.core import history, paths
from sqale_desktop.core.agent.events import (
    CallRecord,
    Episode,
    EpisodeStats,
    QueryResultData,
    TurnRecord,
)
from sqale_desktop.core.history import History, HistoryError, episode_from_json
from tests.helpers import join_within, readline_within

QUESTION = "Which supplier shipped the most back-ordered items last quarter?"


def full_episode(question: str = QUESTION) -> Episode:
    """An episode using every part of the record: turns with calls, a result with NULL and a BLOB."""
    return Episode(
        question=question,
        db="/data/shop.sqlite",
        sql="SELECT s.name FROM suppliers AS s LIMIT 1",
        ended_by="submit_sql",
        result=QueryResultData(
            columns=["name", "logo", "note"],
            rows=[["Harbor & Hale", b"\x89PNG\x00\xff", None], ["Zoë Ltd — ünïcode", b"", 1.5]],
            row_count=2,
            truncated=False,
        ),
        turns=[
            TurnRecord(
                completion='<think>list tables</think>{"tool": "list_tables"}',
                calls=[CallRecord("list_tables", {}, "suppliers, shipments", True, 0.01)],
                completion_tokens=42,
                seconds=1.25,
            ),
            TurnRecord(
                completion="<think>two calls</think>…",
                calls=[
                    CallRecord("join_path", {"table_a": "suppliers", "table_b": "items"}, "a → b", True),
                    CallRecord("run_query", {"sql": "SELECT nope"}, "Error: no such column", False, 0.002),
                ],
                completion_tokens=77,
                seconds=2.5,
                finish_reason="length",
            ),
        ],
        prompt="<|im_start|>system …",
        prompt_source="builtin",
        stats=EpisodeStats(prompt_tokens=900, completion_tokens=119, evaluated_tokens=1019, seconds=3.75),
        error=None,
    )


def test_episode_from_json_inverts_to_json_through_real_json() -> None:
    episode = full_episode()
    assert episode.result is not None
    episode.result.rows = [["x", None, 3]]  # plain JSON has no bytes
    loaded = episode_from_json(json.loads(json.dumps(episode.to_json())))
    assert loaded == episode
    assert isinstance(loaded.turns[1].calls[0], CallRecord)
    assert isinstance(loaded.result, QueryResultData)
    assert isinstance(loaded.stats, EpisodeStats)


def test_episode_from_json_tolerates_other_versions() -> None:
    data = full_episode().to_json()
    data["added_in_a_later_version"] = {"x": 1}
    data["turns"][0]["calls"][0]["also_new"] = True
    del data["stats"]  # written before the field existed: takes its default
    loaded = episode_from_json(data)
    assert loaded.stats == EpisodeStats()
    assert loaded.turns[0].calls[0].tool == "list_tables"


@pytest.mark.parametrize(
    "broken",
    [
        {"db": "x.sqlite"},
        {"question": "q", "db": "x", "turns": {"not": "a list"}},
        {"question": "q", "db": "x", "result": [1, 2]},
    ],
)
def test_episode_from_json_rejects_bad_shapes(broken: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        episode_from_json(broken)


def test_full_episode_round_trips_through_the_store(tmp_path: Path) -> None:
    store = History()
    assert store.path == paths.data_dir() / "history.sqlite"
    conversation = store.conversation_for(tmp_path / "shop.sqlite")
    entry_id = store.add_question(conversation.id, "Which supplier shipped the most back-ordered items?")
    running = store.entry(entry_id)
    assert (running.state, running.episode, running.finished_at) == ("running", None, None)

    episode = full_episode()
    store.finish_episode(entry_id, episode)
    (entry,) = store.entries(conversation.id)
    assert entry.state == "finished"
    assert entry.episode == episode
    assert entry.episode is not None and entry.episode.result is not None
    assert entry.episode.result.rows[0][1] == b"\x89PNG\x00\xff"
    assert (entry.sql, entry.ended_by, entry.row_count) == (episode.sql, "submit_sql", 2)
    assert entry.question == "Which supplier shipped the most back-ordered items?"
    assert entry.finished_at is not None and entry.finished_at >= entry.created_at


def test_a_new_history_object_sees_everything(tmp_path: Path) -> None:
    first = History()
    shop = first.conversation_for(tmp_path / "shop.sqlite", title="My shop")
    other = first.conversation_for(tmp_path / "other.sqlite")
    asked = first.add_question(shop.id, "q1")
    first.finish_episode(asked, full_episode("q1"))
    first.add_rerun(shop.id, "SELECT 1", row_count=1, source_entry_id=asked)
    first.add_rerun(other.id, "SELECT nope", error="no such column: nope")
    before = (first.list_conversations(), first.entries(shop.id), first.entries(other.id))

    second = History()
    assert (second.list_conversations(), second.entries(shop.id), second.entries(other.id)) == before
    assert second.interrupted_at_start == ()
    conversations, shop_entries, other_entries = before
    assert [c.title for c in conversations] == ["other.sqlite", "My shop"]  # most recent activity first
    assert [e.kind for e in shop_entries] == ["question", "rerun"]
    assert shop_entries[1].source_entry_id == asked and shop_entries[1].row_count == 1
    assert other_entries[0].error == "no such column: nope"


def test_conversation_is_one_per_resolved_database_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = History()
    (tmp_path / "db.sqlite").touch()
    (tmp_path / "link.sqlite").symlink_to(tmp_path / "db.sqlite")
    monkeypatch.chdir(tmp_path)
    a = store.conversation_for(tmp_path / "db.sqlite")
    b = store.conversation_for("db.sqlite", title="ignored: it exists")
    c = store.conversation_for(tmp_path / "link.sqlite")
    assert a == b == c
    assert a.db_path == str((tmp_path / "db.sqlite").resolve())
    assert a.title == "db.sqlite"
    assert len(store.list_conversations()) == 1


def test_activity_reorders_conversations(tmp_path: Path) -> None:
    store = History()
    a = store.conversation_for(tmp_path / "a.sqlite")
    b = store.conversation_for(tmp_path / "b.sqlite")
    assert [c.id for c in store.list_conversations()] == [b.id, a.id]
    store.add_question(a.id, "newer activity in a")
    assert [c.id for c in store.list_conversations()] == [a.id, b.id]
    store.rename_conversation(b.id, "Renamed")
    assert {c.id: c.title for c in store.list_conversations()}[b.id] == "Renamed"


def test_delete_conversation_removes_its_entries(tmp_path: Path) -> None:
    store = History()
    keep = store.conversation_for(tmp_path / "keep.sqlite")
    drop = store.conversation_for(tmp_path / "drop.sqlite")
    kept = store.add_question(keep.id, "stays")
    dropped = store.add_question(drop.id, "goes")
    store.delete_conversation(drop.id)
    assert [c.id for c in store.list_conversations()] == [keep.id]
    assert store.entries(drop.id) == []
    assert store.entry(kept).question == "stays"
    with pytest.raises(KeyError):
        store.entry(dropped)
    with pytest.raises(KeyError):
        store.delete_conversation(drop.id)


def test_unknown_ids_are_errors(tmp_path: Path) -> None:
    store = History()
    with pytest.raises(KeyError):
        store.add_question(999, "no such conversation")
    with pytest.raises(KeyError):
        store.finish_episode(999, full_episode())
    conversation = store.conversation_for(tmp_path / "x.sqlite")
    rerun = store.add_rerun(conversation.id, "SELECT 1")
    with pytest.raises(KeyError):
        store.finish_episode(rerun, full_episode())  # a rerun has no episode


def test_unfinished_episode_is_marked_interrupted_at_next_start(tmp_path: Path) -> None:
    first = History()
    conversation = first.conversation_for(tmp_path / "shop.sqlite")
    done = first.add_question(conversation.id, "finished")
    first.finish_episode(done, full_episode("finished"))
    lost = first.add_question(conversation.id, "in flight when the app died")

    second = History()
    assert second.interrupted_at_start == (lost,)
    states = {e.id: e.state for e in second.entries(conversation.id)}
    assert states == {done: "finished", lost: "interrupted"}
    assert second.entry(lost).finished_at is not None
    assert second.entry(done).episode == full_episode("finished")
    assert History().interrupted_at_start == ()  # marked once, not at every start


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_a_killed_process_loses_only_the_episode_in_flight(tmp_path: Path) -> None:
    """A real SIGKILL right after a question is recorded: the finished episode before it survives."""
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(history.__file__).parents[2])!r}]
        from test_history import full_episode
        from sqale_desktop.core.history import History
        store = History()
        conversation = store.conversation_for({str(tmp_path / "shop.sqlite")!r})
        store.finish_episode(store.add_question(conversation.id, "saved"), full_episode("saved"))
        store.add_question(conversation.id, "killed")
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=False, timeout=120)
    assert done.returncode == -signal.SIGKILL
    store = History()
    (conversation,) = store.list_conversations()
    entries = store.entries(conversation.id)
    assert [(e.question, e.state) for e in entries] == [("saved", "finished"), ("killed", "interrupted")]
    assert entries[0].episode == full_episode("saved")


def test_store_is_in_wal_mode_and_versioned() -> None:
    store = History()
    with contextlib.closing(sqlite3.connect(store.path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(history.MIGRATIONS)


def test_migration_hook_upgrades_an_existing_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = History()
    conversation = store.conversation_for(tmp_path / "shop.sqlite")
    asked = store.add_question(conversation.id, "asked before the upgrade")
    store.finish_episode(asked, full_episode())

    def add_pinned(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")

    monkeypatch.setattr(history, "MIGRATIONS", [*history.MIGRATIONS, add_pinned])
    upgraded = History()
    with contextlib.closing(sqlite3.connect(upgraded.path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(history.MIGRATIONS)
        assert conn.execute("SELECT pinned FROM conversations").fetchall() == [(0,)]
    assert upgraded.entry(asked).episode == full_episode()


def test_a_store_from_a_newer_version_is_refused() -> None:
    path = History().path
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version = {len(history.MIGRATIONS) + 1}")
    with pytest.raises(HistoryError, match="newer"):
        History()


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    path.write_bytes(b"this is not a database, just text " * 200)
    with pytest.raises(HistoryError, match="cannot be used"):
        History(path)


def test_an_unreadable_stored_episode_does_not_hide_the_conversation(tmp_path: Path) -> None:
    store = History()
    conversation = store.conversation_for(tmp_path / "shop.sqlite")
    asked = store.add_question(conversation.id, "q")
    store.finish_episode(asked, full_episode())
    with contextlib.closing(sqlite3.connect(store.path)) as conn, conn:
        conn.execute("UPDATE entries SET episode_json = '{\"turns\": 3}' WHERE id = ?", (asked,))
    (entry,) = store.entries(conversation.id)
    assert entry.episode is None
    assert entry.error is not None and "could not be read back" in entry.error
    assert entry.sql == full_episode().sql


def test_concurrent_writers_from_threads(tmp_path: Path) -> None:
    """Eight threads ask, finish and rerun at once (as the UI's pool may) while another reads."""
    store = History()
    shared = store.conversation_for(tmp_path / "shared.sqlite")
    threads_n, rounds = 8, 5
    errors: list[BaseException] = []
    stop_reading = threading.Event()
    start = threading.Barrier(threads_n + 1, timeout=60)

    def writer(n: int) -> None:
        try:
            start.wait()
            own = store.conversation_for(tmp_path / f"db{n}.sqlite")
            for i in range(rounds):
                for conversation_id in (shared.id, own.id):
                    entry_id = store.add_question(conversation_id, f"t{n} q{i}")
                    store.finish_episode(entry_id, full_episode(f"t{n} q{i}"))
                    store.add_rerun(conversation_id, f"SELECT {i}", row_count=1, source_entry_id=entry_id)
        except BaseException as exc:
            errors.append(exc)

    def reader() -> None:
        try:
            start.wait()
            while not stop_reading.is_set():
                store.list_conversations()
                store.entries(shared.id)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads_n)]
    watcher = threading.Thread(target=reader)
    for thread in [*workers, watcher]:
        thread.start()
    try:
        join_within(*workers)
    finally:
        stop_reading.set()
    join_within(watcher)

    assert errors == []
    entries = store.entries(shared.id)
    assert len(entries) == threads_n * rounds * 2
    assert all(e.state == "finished" for e in entries)
    for n in range(threads_n):
        mine = [e for e in entries if e.kind == "question" and (e.question or "").startswith(f"t{n} ")]
        assert [e.question for e in mine] == [f"t{n} q{i}" for i in range(rounds)]  # each thread's order kept
        assert all(e.episode == full_episode(e.question or "") for e in mine)
    assert len(store.list_conversations()) == threads_n + 1


def test_a_second_app_start_leaves_another_live_windows_running_episode_alone(tmp_path: Path) -> None:
    """Two windows share the file: the second start must not mark the first's episode interrupted;
    once the first window's process has ended, the next start does."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{str(Path(history.__file__).parents[2])!r}]
        from sqale_desktop.core.history import History
        store = History()
        conversation = store.conversation_for({str(tmp_path / "shop.sqlite")!r})
        print(store.add_question(conversation.id, "still thinking"), flush=True)
        sys.stdin.read()  # alive until the test closes stdin
        """
    )
    window = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert window.stdout is not None
        running = int(readline_within(window.stdout))
        second = History()
        assert second.interrupted_at_start == ()
        assert second.entry(running).state == "running"
    finally:
        assert window.stdin is not None
        window.stdin.close()
        window.wait(timeout=60)
    third = History()
    assert third.interrupted_at_start == (running,)
    assert third.entry(running).state == "interrupted"
    owners = list((third.path.parent / history.OWNERS_DIR).glob("*.lock"))
    assert len(owners) == 1  # the ended window's lock file is gone, this process's stays
