"""Large schemas: read once per database (two statements, not two per table), shared by every
tool box, and read again when the file's schema changes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.db.introspect import TableInfo, _fill_columns, load_schema
from sqale_desktop.core.tools import ToolBox


def _chain(path: Path, tables: int) -> Path:
    conn = sqlite3.connect(path)
    for i in range(tables):
        ref = f", parent_id INTEGER REFERENCES t{i - 1} (id)" if i else ""
        conn.execute(f"CREATE TABLE t{i} (id INTEGER PRIMARY KEY, name TEXT{ref})")
    conn.commit()
    conn.close()
    return path


def test_every_tool_box_shares_one_reading_until_the_schema_changes(tmp_path: Path) -> None:
    path = _chain(tmp_path / "chain.sqlite", 300)
    with open_readonly(path) as db:
        first, second = ToolBox(db), ToolBox(db)
        assert first.schema is second.schema
        assert second.join_path("t0", "t299").text.startswith("t0 → t1 → t2")
        graph = first.schema.derived["join_graph"]
        first.join_path("t5", "t9")
        assert first.schema.derived["join_graph"] is graph  # built once for the reading
        writer = sqlite3.connect(path)
        writer.execute("CREATE TABLE late (id INTEGER PRIMARY KEY, t0_id INTEGER REFERENCES t0 (id))")
        writer.commit()
        writer.close()
        assert "late" in first.list_tables().text.split(", ")
        assert first.join_path("late", "t2").text.startswith("late → t0 → t1 → t2")


@pytest.mark.parametrize("name", ["chinook", "northwind", "sakila"])
def test_the_bulk_reading_equals_reading_each_table(name: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(name)
    with open_readonly(path) as db:
        bulk = load_schema(db)
        for table in bulk.tables:
            alone = TableInfo(
                name=table.name, kind=table.kind, sql=table.sql, without_rowid=table.without_rowid
            )
            _fill_columns(db, alone)
            assert (alone.columns, alone.foreign_keys, alone.error) == (
                table.columns,
                table.foreign_keys,
                table.error,
            )


def test_find_uses_sqlite_name_rules(tmp_path: Path) -> None:
    path = _chain(tmp_path / "names.sqlite", 3)
    with open_readonly(path) as db:
        schema = load_schema(db)
        assert schema.find("T1") is schema.find("t1") is not None
        assert schema.find("missing") is None
