"""Files another program holds: locked, exclusive WAL, a hot journal. Each gets a true message,
within the time limit, and Stop still works while waiting."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sqale_desktop.core.db import DatabaseUnreadable, QueryInterrupted, open_readonly
from sqale_desktop.core.db.errors import DatabaseLocked
from tests.core.db.running import run_in_thread, wait_until_busy
from tests.helpers import readline_within

HOLDER = r"""
import sqlite3, sys
path, mode = sys.argv[1], sys.argv[2]
conn = sqlite3.connect(path, isolation_level=None)
if mode == "wal-exclusive":
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("INSERT INTO t VALUES (2)")
else:
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO t VALUES (2)")
print("ready", flush=True)
sys.stdin.read()  # hold the lock until the test closes our stdin
"""


def _database(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    conn.close()
    return path


@contextmanager
def _hold(path: Path, mode: str) -> Iterator[None]:
    """Another process holds ``path`` (``exclusive``: BEGIN EXCLUSIVE; or ``wal-exclusive``)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and readline_within(holder.stdout).strip() == "ready"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Path]:
    path = _database(tmp_path / "locked.sqlite")
    with _hold(path, "exclusive"):
        yield path


@pytest.fixture
def wal_exclusive(tmp_path: Path) -> Iterator[Path]:
    path = _database(tmp_path / "wal.sqlite")
    with _hold(path, "wal-exclusive"):
        yield path


def test_a_locked_file_says_so_within_the_time_limit(locked: Path) -> None:
    # SQLite's own busy wait would end after 5 s, whatever the limit, with "database is locked".
    with pytest.raises(DatabaseLocked, match=r"locked by another program .*\(waited 0\.3 s\)"):
        open_readonly(locked, time_limit_s=0.3)


def test_a_wal_database_held_exclusively_is_not_called_read_only(wal_exclusive: Path) -> None:
    with pytest.raises(DatabaseLocked) as info:
        open_readonly(wal_exclusive, time_limit_s=0.3)
    assert "read-only" not in str(info.value)
    assert "locked by another program" in str(info.value)


def test_a_file_locked_after_opening_waits_then_says_so_or_stops(tmp_path: Path) -> None:
    path = _database(tmp_path / "later.sqlite")
    with open_readonly(path, time_limit_s=0.3) as db:
        with _hold(path, "exclusive"):
            with pytest.raises(DatabaseLocked, match=r"waited 0\.3 s"):
                db.execute("SELECT * FROM t")
            db.time_limit_s = 60
            thread, errors = run_in_thread(db, "SELECT * FROM t")
            wait_until_busy(db, thread)
            db.interrupt()
            thread.join(timeout=30)
            assert [type(e) for e in errors] == [QueryInterrupted]
        assert db.execute("SELECT x FROM t").rows == [(1,)]


def test_a_hot_journal_is_named_not_called_a_write(tmp_path: Path) -> None:
    path = _database(tmp_path / "hot.sqlite")
    crash = (
        "import os, sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('PRAGMA cache_size = 2')\n"
        "conn.execute('BEGIN IMMEDIATE')\n"
        "for _ in range(2000): conn.execute('INSERT INTO t VALUES (?)', ('x' * 500,))\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", crash, str(path)], check=True, timeout=60)
    journal = path.with_name(path.name + "-journal")
    assert journal.exists() and journal.stat().st_size > 0
    before = (path.read_bytes(), journal.read_bytes())
    with pytest.raises(DatabaseUnreadable, match="unfinished transaction from another program"):
        open_readonly(path)
    assert (path.read_bytes(), journal.read_bytes()) == before
    assert sorted(os.listdir(tmp_path)) == ["hot.sqlite", "hot.sqlite-journal"]
