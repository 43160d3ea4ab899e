"""Statements run in a database worker process the app can kill (issue 21 §1).

One SQLite C function runs as long as its arguments ask, and neither the progress handler nor
``sqlite3_interrupt`` reaches inside it; these statements ran for tens of seconds to minutes in the
app's own process, and closing the database under one crashed it.  Now each returns control
shortly after its limit or a Stop (the worker is killed and replaced), a crash of the worker is a
message, and the app process survives.  The bounds below are generous on purpose: they tell
"stopped near the limit" from "ran to the end", whatever the machine's speed.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from sqale_desktop.core.db import DatabaseError, QueryInterrupted, QueryTimeout, open_readonly
from sqale_desktop.core.db.errors import QueryOutOfMemory, WorkerCrashed
from sqale_desktop.core.db.process import POOL, set_memory_limit_mb
from tests.core.db.running import run_in_thread, wait_until_busy

LIMIT_S = 1.0
# Control must be back this long after the limit at the latest (the target is 1.5 s; today's
# code took from 10 s to several minutes on each of these).
GENEROUS_S = 10.0


# Strings built inside SQL: N copies of one character, in linear time.
def _repeat(char: str, count: int) -> str:
    return f"replace(hex(zeroblob({count // 2})), '0', '{char}')"


# Each ran far past a 1 s limit in one C call (issue 21); scaled so that none ends on its own
# within GENEROUS_S on any machine.
C_CALL_BOMBS = {
    # The width is text with more than 64 leading blanks (the old replacement read 64 of them);
    # three conversions: 56.6 s at a 1 s limit.
    "printf_width_as_text": (
        "WITH w(n) AS (SELECT printf('%70s%d', '', 2147483647)) "
        "SELECT length(printf('%.*c%.*c%.*c', n, 'x', n, 'y', n, 'z')) FROM w"
    ),
    "like_66mb": f"SELECT {_repeat('a', 66_000_000)} LIKE '%' || {_repeat('a', 996)} || 'b%'",
    "glob_16mb": f"SELECT {_repeat('a', 16_000_000)} GLOB '*' || {_repeat('a', 996)} || 'b*'",
    "replace_4mb": (
        f"SELECT length(replace({_repeat('a', 4_000_000)}, {_repeat('a', 1_000_000)} || 'b', 'c'))"
    ),
    "ltrim_400k": f"SELECT length(ltrim({_repeat('a', 400_000)}, {_repeat('b', 40_000)} || 'a'))",
    "trim_1m": f"SELECT length(trim({_repeat('a', 1_000_000)}, {_repeat('b', 100_000)} || 'a'))",
}


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1000)])
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("name", sorted(C_CALL_BOMBS))
def test_a_single_long_c_call_stops_at_the_time_limit(small: Path, name: str) -> None:
    with open_readonly(small, time_limit_s=LIMIT_S) as db:
        started = time.monotonic()
        with pytest.raises(QueryTimeout) as info:
            db.execute(C_CALL_BOMBS[name])
        assert time.monotonic() - started < LIMIT_S + GENEROUS_S
        assert "1 s time limit" in str(info.value)
        assert db.execute("SELECT count(*) FROM t").rows == [(1000,)]  # a fresh worker answers


def test_the_printf_bypass_inside_a_view_stops_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "view.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE VIEW bomb AS {C_CALL_BOMBS['printf_width_as_text']}")
    conn.close()
    with open_readonly(path, time_limit_s=LIMIT_S) as db:
        started = time.monotonic()
        with pytest.raises(QueryTimeout):
            db.execute("SELECT * FROM bomb")
        assert time.monotonic() - started < LIMIT_S + GENEROUS_S


def test_stop_ends_a_long_c_call(small: Path) -> None:
    with open_readonly(small, time_limit_s=600) as db:
        thread, errors = run_in_thread(db, C_CALL_BOMBS["trim_1m"])
        wait_until_busy(db, thread)
        db.interrupt()
        thread.join(timeout=GENEROUS_S)
        assert not thread.is_alive(), "Stop did not reach the statement"
        assert [type(e) for e in errors] == [QueryInterrupted]
        assert db.execute("SELECT 1").rows == [(1,)]


def test_closing_while_a_long_c_call_runs_returns_promptly_and_never_crashes(small: Path) -> None:
    # The window's quit did this: close the database from the main thread under a running
    # statement (exit 139 in 2 of 6 runs; the window froze 15-22 s on every quit).
    for _ in range(3):
        db = open_readonly(small, time_limit_s=600)
        thread, errors = run_in_thread(db, C_CALL_BOMBS["printf_width_as_text"])
        wait_until_busy(db, thread)
        started = time.monotonic()
        db.close()
        assert time.monotonic() - started < GENEROUS_S
        thread.join(timeout=GENEROUS_S)
        assert not thread.is_alive(), "the statement outlived its database"
        assert [type(e) for e in errors] == [QueryInterrupted]
    with open_readonly(small) as db:
        assert db.execute("SELECT count(*) FROM t").rows == [(1000,)]


def test_a_crashed_worker_is_a_message_and_the_next_query_works(small: Path) -> None:
    with open_readonly(small, time_limit_s=600) as db:
        thread, errors = run_in_thread(db, C_CALL_BOMBS["trim_1m"])
        wait_until_busy(db, thread)
        (pid,) = [pid for pid, running in db.workers_in_use().items() if running]
        os.kill(pid, signal.SIGSEGV)  # what a bug in SQLite or an extension does
        thread.join(timeout=GENEROUS_S)
        assert not thread.is_alive()
        assert [type(e) for e in errors] == [WorkerCrashed]
        assert "the query crashed the database worker" in str(errors[0])
        assert "SIGSEGV" in str(errors[0])
        assert db.execute("SELECT count(*) FROM t").rows == [(1000,)]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# Every row costs one expensive VM instruction (a 5 MB random blob): the progress handler runs
# once per 2,000 instructions, so a page fetch is stopped by the backstop's sqlite3_interrupt.
EXPENSIVE_ROWS = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 100000) "
    "SELECT x, length(randomblob(5000000)) FROM c"
)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files through /proc")
def test_stopped_page_fetches_leak_no_files_and_never_say_closed_database(small: Path) -> None:
    with open_readonly(small, time_limit_s=0.05) as db:
        assert db.execute("SELECT 1").rows == [(1,)]
        before = _open_fds()
        stops = 0
        for _ in range(100):
            try:
                with db.cursor(EXPENSIVE_ROWS) as cursor:
                    cursor.fetch_page(500)
            except QueryTimeout:
                stops += 1
            except DatabaseError as exc:
                assert "closed database" not in str(exc).lower()
                raise
        assert stops == 100
        assert _open_fds() <= before + 4  # a worker being replaced holds two pipes
        assert db.execute("SELECT count(*) FROM t").rows == [(1000,)]


def test_the_memory_cap_turns_a_runaway_allocation_into_a_message(small: Path) -> None:
    keep = POOL.memory_mb
    set_memory_limit_mb(300)
    try:
        with open_readonly(small, time_limit_s=60) as db:
            rows = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 100)"
            with pytest.raises(QueryOutOfMemory, match="more memory than the database worker may use"):
                db.execute(f"{rows} SELECT zeroblob(60000000) FROM c")
            assert db.execute("SELECT count(*) FROM t").rows == [(1000,)]
    finally:
        set_memory_limit_mb(keep)


def test_the_worker_keeps_every_guard(small: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with open_readonly(small) as db:
        for sql in (
            f"ATTACH DATABASE '{other}' AS o",
            "SELECT load_extension('x')",
            "PRAGMA trusted_schema = 1",
            "CREATE TABLE u (y)",
        ):
            with pytest.raises(DatabaseError, match="read-only"):
                db.execute(sql)
        assert db.execute("PRAGMA query_only").rows == [(1,)]
    assert not other.exists()


def test_a_database_used_from_many_threads_runs_them_at_once(small: Path) -> None:
    with open_readonly(small, time_limit_s=600) as db:
        thread, errors = run_in_thread(db, C_CALL_BOMBS["trim_1m"])
        wait_until_busy(db, thread)
        results: list[object] = []
        other = threading.Thread(target=lambda: results.append(db.execute("SELECT count(*) FROM t").rows))
        other.start()
        other.join(timeout=GENEROUS_S)
        assert results == [[(1000,)]]  # not queued behind the runaway statement
        db.interrupt()
        thread.join(timeout=GENEROUS_S)
        assert [type(e) for e in errors] == [QueryInterrupted]
