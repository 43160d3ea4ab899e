"""One result with every kind of cell an exporter can get wrong, as a real SQLite file.

Shared by the export tests of the CLI (tests/commands) and of the grid (tests/ui), which check that
both write the same bytes for it (issue 11, "one exporter").
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

COLUMNS = ["n", "text", "real", "blob"]
QUERY = "SELECT n, text, real, blob FROM t ORDER BY rowid"

# Non-UTF-8 text (CAST of invalid bytes) reads as U+FFFD; 1e999 is stored as infinity.
_ROWS_SQL = [
    "1, 'a,b\tc', 0.1, x'00FF10'",
    "-9223372036854775808, 'say \"hi\", ok', 12.037037037037036, x''",
    "9223372036854775807, 'two' || char(10) || 'lines', 1e-300, NULL",
    "0, 'cr' || char(13, 10) || 'lf and lone' || char(13) || 'cr', 1e999, x'41'",
    "NULL, 'ü€😀', -1e999, NULL",
    "NULL, CAST(x'FF41' AS TEXT), NULL, NULL",
    "42, '', 2.5, 'X''01'''",
    "NULL, NULL, NULL, NULL",
]


def make_database(path: Path) -> Path:
    """Write the awkward table to ``path`` and return it."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE TABLE t (n INTEGER, text TEXT, real REAL, blob BLOB)")
        for values in _ROWS_SQL:
            conn.execute(f"INSERT INTO t VALUES ({values})")
        conn.commit()
    finally:
        conn.close()
    return path
