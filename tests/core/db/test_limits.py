"""Time limits and interrupt(): both stop a runaway query with a clear message and leave the
connection usable; interrupt() works from any thread and only hits what is running."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqale_desktop.core.db import QueryFailed, QueryInterrupted, QueryTimeout, open_readonly
from tests.core.db.running import WAIT_S, run_in_thread, wait_for, wait_until_busy

RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def test_time_limit_stops_a_runaway_query(chinook: Path) -> None:
    with open_readonly(chinook, time_limit_s=0.2) as db:
        with pytest.raises(QueryTimeout) as info:
            db.execute(RUNAWAY)
        assert "0.2 s time limit" in str(info.value)
        assert db.execute("SELECT count(*) FROM Artist").rows == [(275,)]


def test_time_limit_is_settable(chinook: Path) -> None:
    with open_readonly(chinook) as db:
        assert db.time_limit_s == 10.0
        db.time_limit_s = 0.1
        with pytest.raises(QueryTimeout):
            db.execute(RUNAWAY)
        with pytest.raises(ValueError):
            db.time_limit_s = 0


def test_interrupt_from_another_thread(chinook: Path) -> None:
    with open_readonly(chinook, time_limit_s=60) as db:
        thread, errors = run_in_thread(db, RUNAWAY)
        wait_until_busy(db, thread)
        db.interrupt()
        thread.join(timeout=30)
        assert not thread.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], QueryInterrupted)
        assert str(errors[0]) == "the query was cancelled"
        # The worker's connection stays usable, and so does this thread's.
        thread2, errors2 = run_in_thread(db, "SELECT count(*) FROM Track")
        thread2.join(timeout=30)
        assert errors2 == []
        assert db.execute("SELECT 1").rows == [(1,)]


def test_interrupt_before_a_query_does_not_cancel_it(chinook: Path) -> None:
    with open_readonly(chinook) as db:
        db.interrupt()
        result = db.execute(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000) "
            "SELECT count(*) FROM c"
        )
        assert result.rows == [(200000,)]


def test_each_running_statement_has_its_own_worker_and_interrupt_reaches_them_all(chinook: Path) -> None:
    with open_readonly(chinook, time_limit_s=60) as db:
        db.execute("SELECT 1")
        runs = [run_in_thread(db, RUNAWAY) for _ in range(2)]
        for thread, _ in runs:
            wait_until_busy(db, thread)
        both = wait_for(lambda: sum(db.workers_in_use().values()) >= 2, WAIT_S)
        assert both, f"the two statements did not both run within {WAIT_S:g} s"
        # Two workers, each running one (the first statement's worker serves one of them).
        assert list(db.workers_in_use().values()) == [True, True]
        db.interrupt()
        for thread, errors in runs:
            thread.join(timeout=30)
            assert [type(e) for e in errors] == [QueryInterrupted]


def test_huge_single_values_are_refused_not_allocated(chinook: Path) -> None:
    with open_readonly(chinook) as db:
        with pytest.raises(QueryFailed, match="too big"):
            db.execute("SELECT length(zeroblob(2000000000))")
        assert db.execute("SELECT length(zeroblob(1000))").rows == [(1000,)]


def test_close_interrupts_a_running_query(chinook: Path) -> None:
    db = open_readonly(chinook, time_limit_s=60)
    thread, errors = run_in_thread(db, RUNAWAY)
    wait_until_busy(db, thread)
    db.close()
    thread.join(timeout=30)
    assert [type(e) for e in errors] == [QueryInterrupted]
