"""The schema is read as a whole under the database's time limit (issue 30 item 5): 3,000 chained
views make SQLite resolve every view through the chain, and one statement each at the limit took
23.7 s at a 1 s limit."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqale_desktop.core.db import load_schema, open_readonly


def test_a_schema_of_3000_chained_views_opens_with_the_unread_objects_saying_why(tmp_path: Path) -> None:
    path = tmp_path / "chain.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE base (a INTEGER, b TEXT)")
    # Written into the schema table at once: CREATE VIEW checks each view through the whole chain,
    # which makes building 3,000 of them take minutes.
    conn.execute("PRAGMA writable_schema = ON")
    with conn:
        conn.executemany(
            "INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) VALUES ('view', ?, ?, 0, ?)",
            [
                (f"v{i}", f"v{i}", f"CREATE VIEW v{i} AS SELECT * FROM {'base' if i == 0 else f'v{i - 1}'}")
                for i in range(3000)
            ],
        )
        version = conn.execute("PRAGMA schema_version").fetchone()[0]
        conn.execute(f"PRAGMA schema_version = {version + 1}")
    conn.close()
    with open_readonly(path, time_limit_s=0.5) as db:
        schema = load_schema(db)
        assert len(schema.tables) == 3001
        unread = [t for t in schema.tables if t.error]
        assert unread, "the chain cannot be resolved within 0.5 s"
        assert all("passed the time limit (0.5 s)" in t.error for t in unread if t.error)
        assert all(t.columns or t.error for t in schema.tables)
        assert db.execute("SELECT count(*) FROM base").rows == [(0,)]  # the database still answers


def test_an_ordinary_schema_is_read_whole_under_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    conn = sqlite3.connect(path)
    for i in range(200):
        conn.execute(f"CREATE TABLE t{i} (id INTEGER PRIMARY KEY, v TEXT)")
    conn.execute("CREATE VIEW both_ AS SELECT * FROM t0 JOIN t1 USING (id)")
    conn.commit()
    conn.close()
    with open_readonly(path, time_limit_s=10.0) as db:
        schema = load_schema(db)
    assert not [t.name for t in schema.tables if t.error]
    assert [c.name for c in schema.tables[-1].columns] == ["id", "v", "v:1"]
