"""The database workers are bounded (issue 32 item 9): 17 tabs had 45 worker processes (1.45 GB).

Every step of work leases a worker and puts it back idle, its session still open, so a database
used from many threads one at a time needs one worker; the pool's cap holds across databases (a
paged cursor whose worker went to another database resumes where it was); idle workers are
ended; closing leaves no process behind.  Processes are counted in /proc, not in the pool.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.db.process import POOL, SPARES
from tests.core.db.running import wait_for, worker_pids

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="counts processes in /proc")

ROWS = 1_200  # more than two pages of 500: a cursor stays open after its first page


def _database(path: Path, tag: int) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x INTEGER, tag INTEGER)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, tag) for i in range(ROWS)])
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    return [_database(tmp_path / f"db{i}.sqlite", i) for i in range(10)]


@pytest.fixture
def small_cap(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(POOL, "max_workers", 3)
    yield 3


def test_one_database_used_from_many_threads_in_turn_needs_one_worker(files: list[Path]) -> None:
    with open_readonly(files[0]) as db:
        before = worker_pids()
        for _ in range(12):  # each a new thread, as the pools' threads come and go
            answers: list[object] = []

            def ask(answers: list[object] = answers) -> None:
                answers.append(db.execute("SELECT count(*) FROM t").rows)

            thread = threading.Thread(target=ask)
            thread.start()
            thread.join(timeout=30)
            assert answers == [[(ROWS,)]]
        assert len(worker_pids() | before) <= 1 + SPARES + 1  # one serving, the spare, the probe's


def test_the_cap_holds_across_databases_and_cursors_resume(files: list[Path], small_cap: int) -> None:
    dbs = [open_readonly(path) for path in files]
    try:
        cursors = []
        for db in dbs:
            cursor = db.cursor("SELECT x, tag FROM t ORDER BY x")
            cursors.append((cursor, cursor.fetch_page(500)))
            assert len(worker_pids()) <= small_cap
        # Ten cursors between pages, three workers: most had their worker taken; each goes on
        # where it was, in order, nothing skipped or repeated.
        for tag, (cursor, first) in enumerate(cursors):
            rows = first + cursor.fetch_page(500) + cursor.fetch_page(1000)
            assert rows == [(i, tag) for i in range(ROWS)]
            assert cursor.exhausted
            assert len(worker_pids()) <= small_cap
        for db in dbs:
            assert db.execute("SELECT count(*) FROM t").rows == [(ROWS,)]
        assert len(worker_pids()) <= small_cap
    finally:
        for db in dbs:
            db.close()


def test_at_the_cap_steps_of_many_threads_wait_their_turn(files: list[Path], small_cap: int) -> None:
    dbs = [open_readonly(path) for path in files]
    results: list[object] = []
    errors: list[BaseException] = []

    def work(db: object) -> None:
        try:
            for _ in range(5):
                results.append(db.execute("SELECT sum(x) FROM t").rows)  # type: ignore[attr-defined]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(db,)) for db in dbs]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors
        assert results == [[(ROWS * (ROWS - 1) // 2,)]] * 50
        assert len(worker_pids()) <= small_cap
    finally:
        for db in dbs:
            db.close()


def test_idle_workers_are_ended(files: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(POOL, "idle_s", 0.2)
    dbs = [open_readonly(path) for path in files[:4]]
    try:
        for db in dbs:
            assert db.execute("SELECT count(*) FROM t").rows == [(ROWS,)]
        # Each database keeps its worker while used; idle, they go, the spare excepted.
        assert wait_for(lambda: len(worker_pids()) <= SPARES), worker_pids()
        for db in dbs:  # and the next step opens the file again in a worker
            assert db.execute("SELECT count(*) FROM t").rows == [(ROWS,)]
    finally:
        for db in dbs:
            db.close()


def test_closing_every_database_and_the_pool_leaves_no_worker(files: list[Path]) -> None:
    dbs = [open_readonly(path) for path in files]
    cursors = [db.cursor("SELECT x FROM t") for db in dbs]
    for cursor in cursors:
        cursor.fetch_page(10)
    assert worker_pids()
    for db in dbs:
        db.close()
    assert wait_for(lambda: len(worker_pids()) <= SPARES), worker_pids()
