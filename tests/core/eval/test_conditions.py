"""Schema-size conditions: reduced databases hold exactly the chosen tables, rows and foreign keys."""

from __future__ import annotations

import hashlib
import random
import sqlite3
from pathlib import Path

import pytest

from sqale_desktop.core.eval import sql_facts
from sqale_desktop.core.eval.conditions import (
    Condition,
    ConditionError,
    choose_tables,
    parse_condition,
    prepare_database,
    read_schema,
    strip_references,
)
from tests.helpers import shared_data

CONCERT = "text2sql/spider/database/concert_singer/concert_singer.sqlite"
JOIN_GOLD = (
    "SELECT T2.name FROM singer_in_concert AS T1 JOIN singer AS T2 ON T1.singer_id = T2.singer_id "
    "WHERE T1.concert_id = 1"
)


def _fingerprint(path: Path) -> tuple[str, int, list[str]]:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest, path.stat().st_mtime_ns, sorted(p.name for p in path.parent.iterdir())


def _tables(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")
        ]
    finally:
        conn.close()


def _rows(path: Path, table: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return sorted(conn.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr)
    finally:
        conn.close()


def _fks(path: Path, table: str) -> set[tuple[str, str, str]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {
            (r[2], r[3], r[4]) for r in conn.execute("SELECT * FROM pragma_foreign_key_list(?)", (table,))
        }
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gold", Condition("gold")),
        ("full", Condition("full")),
        ("distractors", Condition("distractors", 32)),
        ("distractors:5", Condition("distractors", 5)),
    ],
)
def test_parse_condition(text: str, expected: Condition) -> None:
    assert parse_condition(text) == expected
    assert parse_condition(expected.label) == expected


@pytest.mark.parametrize("text", ["", "gold:3", "distractors:x", "half"])
def test_parse_condition_refuses_nonsense(text: str) -> None:
    with pytest.raises(ConditionError):
        parse_condition(text)


def test_gold_tables_ignore_ctes_aliases_and_subqueries() -> None:
    assert sql_facts.tables(JOIN_GOLD) == {"singer_in_concert", "singer"}
    cte = (
        "WITH singer AS (SELECT * FROM concert) "
        "SELECT s.x FROM singer AS s JOIN (SELECT * FROM stadium) AS sub"
    )
    assert sql_facts.tables(cte) == {"concert", "stadium"}  # the CTE shadows the real singer table
    nested = "SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM singer_in_concert)"
    assert sql_facts.tables(nested) == {"singer", "singer_in_concert"}
    assert sql_facts.tables("SELECT 1") == frozenset()
    assert sql_facts.tables("not sql ((") == frozenset()


def test_string_literals() -> None:
    sql = "SELECT a FROM t WHERE b = 'France' AND c LIKE '%x%' AND d = 3 AND e = 'France' AND f = ''"
    assert sorted(sql_facts.string_literals(sql)) == ["%x%", "France"]


def test_strip_references_cuts_only_dangling_clauses() -> None:
    ddl = (
        'CREATE TABLE "e" (id INTEGER PRIMARY KEY, d INTEGER CONSTRAINT c1 REFERENCES [dept](id) '
        "ON DELETE SET NULL NOT NULL, k int references keep(id) on update cascade, "
        "FOREIGN KEY (boss) REFERENCES `Boss`(id) MATCH FULL, CHECK (id > 0), "
        "constraint f foreign key (k) references keep)"
    )
    out = strip_references(ddl, {"keep", "e"})
    assert out == (
        'CREATE TABLE "e" (id INTEGER PRIMARY KEY, d INTEGER  NOT NULL, k int references keep(id) on update '
        "cascade, CHECK (id > 0), constraint f foreign key (k) references keep)"
    )
    conn = sqlite3.connect(":memory:")
    conn.execute(out)  # still valid SQLite, and the rowid alias is kept
    assert conn.execute("SELECT pk FROM pragma_table_info('e') WHERE name = 'id'").fetchone() == (1,)
    assert strip_references(ddl, {"keep", "dept", "boss"}) == ddl


def test_gold_condition_holds_exactly_the_gold_tables_rows_and_foreign_keys(tmp_path: Path) -> None:
    source = shared_data(CONCERT)
    before = _fingerprint(source)
    path, gold = prepare_database(
        source, JOIN_GOLD, Condition("gold"), seed=0, question_key="q", cache=tmp_path / "cache"
    )
    assert path.parent == tmp_path / "cache"
    assert sorted(gold) == ["singer", "singer_in_concert"]
    assert sorted(_tables(path)) == ["singer", "singer_in_concert"]
    for table in gold:
        assert _rows(path, table) == _rows(source, table)
    # the foreign key to singer stays (both ends kept); the one to concert is cut
    assert _fks(path, "singer_in_concert") == {("singer", "Singer_ID", "Singer_ID")}
    assert _fingerprint(source) == before
    again, _ = prepare_database(
        source, JOIN_GOLD, Condition("gold"), seed=0, question_key="q", cache=tmp_path / "cache"
    )
    assert again == path and len(list((tmp_path / "cache").iterdir())) == 1


def test_distractors_grow_along_foreign_keys_then_at_random(tmp_path: Path) -> None:
    source = shared_data(CONCERT)
    before = _fingerprint(source)
    gold_sql = "SELECT count(*) FROM singer"
    path, _ = prepare_database(
        source, gold_sql, Condition("distractors", 1), seed=3, question_key="q", cache=tmp_path
    )
    # singer's only foreign-key neighbour is singer_in_concert
    assert sorted(_tables(path)) == ["singer", "singer_in_concert"]
    path2, _ = prepare_database(
        source, gold_sql, Condition("distractors", 2), seed=3, question_key="q", cache=tmp_path
    )
    assert sorted(_tables(path2)) == ["concert", "singer", "singer_in_concert"]  # the next ring
    assert _fks(path2, "singer_in_concert") == {
        ("singer", "Singer_ID", "Singer_ID"),
        ("concert", "concert_ID", "concert_ID"),
    }
    assert _fks(path2, "concert") == set()  # stadium was left out
    path3, _ = prepare_database(
        source, gold_sql, Condition("distractors", 32), seed=3, question_key="q", cache=tmp_path
    )
    assert sorted(_tables(path3)) == sorted(_tables(source))  # K beyond the schema: every table
    full, _ = prepare_database(source, gold_sql, Condition("full"), seed=3, question_key="q", cache=tmp_path)
    assert full == source
    assert _fingerprint(source) == before


def test_choose_tables_shuffles_and_fills_at_random() -> None:
    conn = sqlite3.connect(":memory:")
    conn.executescript(
        "CREATE TABLE a (id INTEGER PRIMARY KEY); CREATE TABLE b (a_id REFERENCES a(id));"
        + "".join(f"CREATE TABLE lone{i} (x);" for i in range(20))
    )
    schema = read_schema(conn)
    picks = {
        tuple(choose_tables(schema, ["a"], Condition("distractors", 3), random.Random(s))) for s in range(20)
    }
    assert all(len(p) == 4 and {"a", "b"} <= set(p) for p in picks)  # the FK neighbour comes first
    assert len({p for p in picks}) > 1 and len({p[0] for p in picks}) > 1  # random fill, shuffled order
