"""Reduced copies under the same guard as queries: no source expression runs unguarded, nothing is
left beside a WAL source, the cache follows the content, and every real file of ../shared/data
either reduces or says clearly which table could not be copied."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from sqale_desktop.core.eval.conditions import (
    Condition,
    ConditionError,
    prepare_database,
    read_schema,
)
from tests.helpers import shared_data

# One C call that no progress handler can stop: trim() of a 1,000,000-character text by a
# 100,000-character set compares every character with the whole set (10^11 steps; the red team's
# 1M x 100k trim was still running at 300 s).
BOMB = "length(trim(x, y))"


def _bomb_source(tmp_path: Path, *, index: bool) -> Path:
    """Three valid rows; a CHECK (and, with ``index``, an index expression) that calls the bomb."""
    path = tmp_path / "bomb.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA ignore_check_constraints = 1")  # writing the rows must not run it either
    conn.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT, y TEXT, CHECK ({BOMB} >= 0))")
    x, y = "a" * 1_000_000, "b" * 99_999 + "a"
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", [(1, x, y), (2, "short", "s"), (3, None, None)])
    if index:
        # made on a cheap expression, then given the bomb's text (building it here would run it)
        conn.execute("CREATE INDEX bomb ON t (length(x))")
        conn.commit()
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(
            "UPDATE sqlite_master SET sql = ? WHERE name = 'bomb'", (f"CREATE INDEX bomb ON t ({BOMB})",)
        )
    conn.commit()
    conn.close()
    return path


def test_a_check_that_calls_a_bomb_is_never_evaluated(tmp_path: Path) -> None:
    source = _bomb_source(tmp_path, index=False)
    path, gold = prepare_database(
        source, "SELECT id FROM t", Condition("gold"), seed=0, question_key="q", cache=tmp_path / "c",
        time_limit_s=1.0,
    )  # fmt: skip
    assert gold == ["t"]
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert [r[0] for r in conn.execute("SELECT id FROM t ORDER BY id")] == [1, 2, 3]
        assert BOMB in conn.execute("SELECT sql FROM sqlite_master WHERE name = 't'").fetchone()[0]
    finally:
        conn.close()


def test_an_index_that_calls_a_bomb_is_stopped_at_the_time_limit(tmp_path: Path) -> None:
    source = _bomb_source(tmp_path, index=True)
    with pytest.raises(ConditionError, match=r"index bomb ran past the 0\.5 s time limit"):
        prepare_database(
            source, "SELECT id FROM t", Condition("gold"), seed=0, question_key="q", cache=tmp_path / "c",
            time_limit_s=0.5,
        )  # fmt: skip
    assert not list((tmp_path / "c").iterdir())  # no half-built copy is kept


def test_stop_ends_a_build_stuck_in_a_bomb(tmp_path: Path) -> None:
    source = _bomb_source(tmp_path, index=True)
    cancel = threading.Event()

    def on_step(step: str) -> None:
        if step == "index bomb":
            cancel.set()  # Stop pressed while the child is inside the one long C call

    with pytest.raises(ConditionError, match="cancelled"):
        prepare_database(
            source, "SELECT id FROM t", Condition("gold"), seed=0, question_key="q", cache=tmp_path / "c",
            time_limit_s=3600.0, cancel=cancel, on_step=on_step,
        )  # fmt: skip


def _wal_source(folder: Path) -> Path:
    folder.mkdir()
    path = folder / "wal.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    conn.execute("CREATE TABLE other (id INTEGER PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES (1, 'old')")
    conn.commit()
    conn.close()  # the last connection checkpoints and removes -wal and -shm
    return path


def test_nothing_is_left_beside_a_wal_source(tmp_path: Path) -> None:
    source = _wal_source(tmp_path / "data")
    assert sorted(p.name for p in source.parent.iterdir()) == ["wal.sqlite"]
    for condition in (Condition("gold"), Condition("distractors", 1), Condition("full")):
        prepare_database(source, "SELECT v FROM t", condition, seed=0, question_key="q", cache=tmp_path / "c")
        assert sorted(p.name for p in source.parent.iterdir()) == ["wal.sqlite"], condition


def test_a_commit_still_in_the_wal_builds_a_new_copy(tmp_path: Path) -> None:
    """Another program's commit sits in the -wal; the main file's size and mtime are unchanged."""
    source = _wal_source(tmp_path / "data")
    cache = tmp_path / "c"
    old, _ = prepare_database(
        source, "SELECT v FROM t", Condition("gold"), seed=0, question_key="q", cache=cache
    )
    before = source.stat()
    writer = sqlite3.connect(source)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("UPDATE t SET v = 'new'")
        writer.commit()
        assert (source.stat().st_size, source.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        new, _ = prepare_database(
            source, "SELECT v FROM t", Condition("gold"), seed=0, question_key="q", cache=cache
        )
    finally:
        writer.close()
    assert new != old
    conn = sqlite3.connect(f"file:{new}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT v FROM t").fetchall() == [("new",)]
    finally:
        conn.close()


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


REAL_FILES = [
    "sample/chinook.sqlite",
    "sample/northwind.sqlite",
    "sample/sakila.sqlite",
    "awkward/android__babel.db",
    "awkward/android__twitter.db",
    "awkward/anki_schema17.anki2",
    "awkward/datasette_fixtures.sqlite",
    "awkward/datasette_spatialite.sqlite",
    "awkward/datasette_vec.sqlite",
    "awkward/ios__powerlog_84E2141B.PLSQL.sqlite",
    "awkward/proj_9.1.1.db",
    "awkward/sakila_fts5.sqlite",
    "awkward/sakila_whitespace.sqlite",
    "awkward/wal/wal_database.db",
]


@pytest.mark.parametrize("name", REAL_FILES)
def test_every_real_file_reduces_with_every_table_it_can_copy(tmp_path: Path, name: str) -> None:
    source = shared_data(name)
    conn = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        schema = read_schema(conn)
        shadow = {r[0] for r in conn.execute("SELECT name FROM pragma_table_list WHERE type = 'shadow'")}
    finally:
        conn.close()
    path, _ = prepare_database(
        source, "SELECT 1", Condition("distractors", 10_000), seed=0, question_key="q", cache=tmp_path
    )
    copied = _tables(path) - {"sqlite_sequence", "sqlite_stat1"}
    assert copied == set(schema.tables)
    assert not shadow & set(schema.tables)  # an FTS index's storage is never offered as a distractor


def test_fts_tables_are_copied_as_their_data_without_their_shadow_tables(tmp_path: Path) -> None:
    source = shared_data("awkward/sakila_fts5.sqlite")
    path, gold = prepare_database(
        source, "SELECT * FROM actor_fts", Condition("gold"), seed=0, question_key="q", cache=tmp_path
    )
    assert gold == ["actor_fts"] and _tables(path) == {"actor_fts"}
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    original = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        assert (
            conn.execute("SELECT * FROM actor_fts").fetchall()
            == original.execute("SELECT * FROM actor_fts").fetchall()
        )
    finally:
        conn.close()
        original.close()


def test_a_gold_table_whose_module_is_missing_is_named(tmp_path: Path) -> None:
    source = shared_data("awkward/datasette_vec.sqlite")
    with pytest.raises(ConditionError, match=r"gold table vec_vectors cannot be copied.*module vec0"):
        prepare_database(
            source, "SELECT * FROM vec_vectors", Condition("gold"), seed=0, question_key="q", cache=tmp_path
        )


def test_a_collation_sqlite_lacks_does_not_stop_the_copy(tmp_path: Path) -> None:
    source = shared_data("awkward/anki_schema17.anki2")
    conn = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        schema = read_schema(conn)
    finally:
        conn.close()
    assert schema.collations == ["unicase"]
    path, _ = prepare_database(
        source, "SELECT * FROM notetypes", Condition("gold"), seed=0, question_key="q", cache=tmp_path
    )
    assert "notetypes" in _tables(path)


def test_a_default_evaluated_on_conflict_replace_is_stopped_at_the_time_limit(tmp_path: Path) -> None:
    """``NOT NULL ON CONFLICT REPLACE DEFAULT (<bomb>)``: copying a NULL evaluates the default, in one
    C call. Nothing in the schema looks like an expression index or a generated column, and every
    build runs in the child all the same."""
    path = tmp_path / "default.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)")
    conn.executemany("INSERT INTO t VALUES (?, NULL)", [(i,) for i in range(10)])
    conn.commit()
    bomb = "length(trim(printf('%.1000000c', 'a'), printf('%.99999c', 'b') || 'a'))"
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute(
        "UPDATE sqlite_master SET sql = ? WHERE name = 't'",
        (
            "CREATE TABLE t (id INTEGER PRIMARY KEY, "
            f"v INTEGER NOT NULL ON CONFLICT REPLACE DEFAULT ({bomb}))",
        ),
    )
    conn.commit()
    conn.close()
    with pytest.raises(ConditionError, match=r"table t ran past the 0\.5 s time limit"):
        prepare_database(
            path, "SELECT id FROM t", Condition("gold"), seed=0, question_key="q", cache=tmp_path / "c",
            time_limit_s=0.5,
        )  # fmt: skip
    assert not list((tmp_path / "c").iterdir())
