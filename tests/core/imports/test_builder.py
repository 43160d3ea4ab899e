"""The staging insert: many rows per statement, in order, and never a cell shifted into another row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sqale_desktop.core.imports import ImportLimits, builder

LIMIT = ImportLimits().write_bytes


@pytest.mark.parametrize("count", [0, 1, builder.ROWS_PER_INSERT, 2 * builder.ROWS_PER_INSERT + 37])
def test_insert_keeps_every_row_in_order(tmp_path: Path, count: int) -> None:
    conn = builder.open_build(tmp_path / "new.sqlite", LIMIT)
    build = builder.Builder(conn, LIMIT)
    conn.execute("CREATE TABLE stage.t0 (c0, c1, c2)")
    batch = [[f"{i}", f"name {i}", None if i % 5 == 0 else f"{i * 0.5}"] for i in range(count)]
    build._insert("t0", 3, batch)
    got = conn.execute("SELECT c0, c1, c2 FROM stage.t0 ORDER BY rowid").fetchall()
    conn.close()
    assert got == [tuple(row) for row in batch]


def test_insert_refuses_rows_of_another_width(tmp_path: Path) -> None:
    conn = builder.open_build(tmp_path / "new.sqlite", LIMIT)
    build = builder.Builder(conn, LIMIT)
    conn.execute("CREATE TABLE stage.t0 (c0, c1)")
    batch = [["a", "b"]] * 300 + [["c"]] + [["d", "e", "f"]] * 299
    with pytest.raises(RuntimeError, match="2 cells"):
        build._insert("t0", 2, batch)
    assert conn.execute("SELECT count(*) FROM stage.t0").fetchone() == (0,)
    conn.close()


def test_few_variables_allowed_still_inserts_one_row_per_statement(tmp_path: Path) -> None:
    conn = builder.open_build(tmp_path / "new.sqlite", LIMIT)
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 3)
    build = builder.Builder(conn, LIMIT)
    conn.execute("CREATE TABLE stage.t0 (c0, c1, c2)")
    batch = [[str(i), "x", "y"] for i in range(450)]
    build._insert("t0", 3, batch)
    assert conn.execute(
        "SELECT count(*), min(CAST(c0 AS INTEGER)), max(CAST(c0 AS INTEGER)) FROM stage.t0"
    ).fetchone() == (450, 0, 449)
    conn.close()
