"""A step the time limit ended says so, never "cancelled" (that word is for a person's Stop).

The worker's backstop interrupts the connection ``GRACE_S`` past a step's deadline.  A step can
end the normal way in that very moment (one long C call, such as ``randomblob`` of megabytes,
returns its row just as the interrupt lands), and the interrupt then stayed in force on the
connection while a paged cursor was open: the next page, within its own deadline and with no
Stop, ended "cancelled" (43 of 100 paged fetches under load, none in three runs on a quiet
machine).  Here the race is made certain: the worker runs in this process, and each step waits,
after SQLite answered, until the backstop has fired.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core.db import session as session_module
from sqale_desktop.core.db.opening import decode_text
from sqale_desktop.core.db.worker import Worker

LIMIT_S = 0.05
WAIT_S = 30.0  # for the backstop's thread, on a loaded machine


@pytest.fixture
def rows(tmp_path: Path) -> Path:
    path = tmp_path / "rows.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1000)])
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def worker(rows: Path) -> Worker:
    made = Worker(memory_mb=0)
    assert made.handle(("open", str(rows), True, decode_text)) == ("ok", None)
    return made


def _fires_as_it_answers(worker: Worker, step: Callable[..., Any]) -> Callable[..., Any]:
    """``step`` (a Session method), then wait until the backstop has fired: SQLite answered
    before the interrupt, which lands before the worker replies."""

    def late(*args: Any) -> Any:
        answer = step(*args)
        until = time.monotonic() + WAIT_S
        while not worker.backstop.fired:
            assert time.monotonic() < until, "the backstop never fired"
            time.sleep(0.005)
        return answer

    return late


def _deadline() -> float:
    return time.monotonic() + LIMIT_S


def _start(key: int) -> tuple[Any, ...]:
    return ("start", [], key, "SELECT x FROM t", (), 0, _deadline(), LIMIT_S)


def _fetch(key: int, count: int) -> tuple[Any, ...]:
    return ("fetch", [], key, count, 10**8, _deadline(), LIMIT_S)


def _timeout() -> tuple[Any, ...]:
    return ("error", "QueryTimeout", session_module.time_limit_message(LIMIT_S), False)


def test_a_cursor_start_the_backstop_caught_as_it_answered_is_a_time_out(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        late = _fires_as_it_answers(worker, session_module.Session.start)
        patch.setattr(session_module.Session, "start", late)
        assert worker.handle(_start(1)) == _timeout()
    # The connection carries no interrupt into the next statement: it runs, and pages, normally.
    assert worker.handle(_start(2)) == ("ok", ["x"])
    assert worker.handle(_fetch(2, 3)) == ("ok", ([(0,), (1,), (2,)], worker_bytes(3)))


def test_a_page_the_backstop_caught_as_it_answered_is_a_time_out_and_the_next_page_is_not_cancelled(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert worker.handle(_start(1)) == ("ok", ["x"])
    assert worker.handle(_start(2)) == ("ok", ["x"])  # another cursor stays open between pages
    with monkeypatch.context() as patch:
        late = _fires_as_it_answers(worker, session_module.Session.fetch)
        patch.setattr(session_module.Session, "fetch", late)
        assert worker.handle(_fetch(1, 3)) == _timeout()
    # Every open cursor went with the interrupted connection (their pages would have been
    # "cancelled"): they say they were stopped, and a new statement runs normally.
    reply = worker.handle(_fetch(2, 3))
    assert reply[:2] == ("error", "QueryInterrupted") and "cancelled" not in reply[2]
    assert worker.handle(("execute", [], "SELECT count(*) FROM t", (), 10, _deadline(), LIMIT_S)) == (
        "ok",
        (["count(*)"], [(1000,)], False),
    )


def test_many_steps_the_backstop_caught_as_they_answered_never_say_cancelled(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reported symptom, without the luck it needed: paged fetches ended by the time limit."""
    replies: list[Any] = []
    for key in range(1, 21):
        assert worker.handle(_start(key)) == ("ok", ["x"])
        with monkeypatch.context() as patch:
            late = _fires_as_it_answers(worker, session_module.Session.fetch)
            patch.setattr(session_module.Session, "fetch", late)
            replies.append(worker.handle(_fetch(key, 2)))
        replies.append(worker.handle(_fetch(key, 2)))  # the page after: its cursor went too
    assert not [r for r in replies if "cancelled" in repr(r)], replies
    assert replies.count(_timeout()) == 20


def worker_bytes(count: int) -> int:
    """The value bytes ``count`` one-integer rows of small values take (``session.value_bytes``)."""
    return sum(session_module.value_bytes((i,)) for i in range(count))
