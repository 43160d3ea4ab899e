"""A WAL database read in a writable folder: the -shm the app caused is gone when it closes,
unless another program is using it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.db.connection import ReadOnlyDatabase
from tests.helpers import readline_within

READER = r"""
import sqlite3, sys
conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print(conn.execute("SELECT count(*) FROM t").fetchone()[0], flush=True)
sys.stdin.readline()
print(conn.execute("SELECT count(*) FROM t").fetchone()[0], flush=True)
"""


def _wal_database(folder: Path) -> Path:
    path = folder / "wal.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1), (2)")
    conn.commit()
    conn.close()  # the last writer checkpoints and removes its -wal and -shm
    assert sorted(p.name for p in folder.iterdir()) == ["wal.sqlite"]
    return path


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX record locks decide when removing is safe")
def test_nothing_is_left_beside_the_database(tmp_path: Path) -> None:
    path = _wal_database(tmp_path)
    with open_readonly(path) as db:
        assert db.execute("SELECT count(*) FROM t").rows == [(2,)]
        twin = ReadOnlyDatabase(db.path, immutable=False, time_limit_s=10, notes=[])
        assert twin.execute("SELECT 1").rows == [(1,)]
        assert (tmp_path / "wal.sqlite-shm").exists()  # in use while open
    assert (tmp_path / "wal.sqlite-shm").exists()  # the twin still reads through it
    twin.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wal.sqlite"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX record locks decide when removing is safe")
def test_a_shm_another_program_uses_is_left_alone(tmp_path: Path) -> None:
    path = _wal_database(tmp_path)
    with open_readonly(path) as db:
        db.execute("SELECT 1")
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert reader.stdout is not None and readline_within(reader.stdout).strip() == "2"
    try:
        assert (tmp_path / "wal.sqlite-shm").exists()
    finally:
        assert reader.stdin is not None
        reader.stdin.write("\n")
        reader.stdin.close()
        assert readline_within(reader.stdout).strip() == "2"  # it still reads through the same -shm
        assert reader.wait(timeout=30) == 0


def test_a_shm_that_was_there_before_is_never_removed(tmp_path: Path) -> None:
    path = _wal_database(tmp_path)
    keeper = sqlite3.connect(path)  # a writer keeps the -shm (and the database) open
    keeper.execute("SELECT 1").fetchone()
    keeper.execute("INSERT INTO t VALUES (3)")
    keeper.commit()
    try:
        with open_readonly(path) as db:
            assert db.execute("SELECT count(*) FROM t").rows == [(3,)]
        assert (tmp_path / "wal.sqlite-shm").exists()
    finally:
        keeper.close()
