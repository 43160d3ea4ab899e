"""Run a statement on another thread and wait until it is inside SQLite, to Stop it from here;
list the database worker processes running (``worker_pids``)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from sqale_desktop.core.db import ReadOnlyDatabase


def run_in_thread(db: ReadOnlyDatabase, sql: str) -> tuple[threading.Thread, list[BaseException]]:
    """Start ``db.execute(sql)`` on a new thread; the list collects what it raised."""
    errors: list[BaseException] = []

    def work() -> None:
        try:
            db.execute(sql)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    return thread, errors


WAIT_S = 60.0
"""How long a wait for a statement lasts before it fails: generous, for a machine loaded by other work."""


def wait_until_busy(db: ReadOnlyDatabase, thread: threading.Thread) -> None:
    """Return once the statement runs; fail if it ended before it could be interrupted, or never
    started."""

    def running() -> bool:
        assert thread.is_alive(), "the query ended before it could be interrupted"
        return db.busy

    assert wait_for(running, WAIT_S), f"the statement did not start within {WAIT_S:g} s"


WORKER_MODULE = "sqale_desktop.core.db.worker"


def worker_pids() -> set[int]:
    """The database worker processes this process has running now (Linux: read from /proc)."""
    me = os.getpid()
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
        except OSError:
            continue  # ended while we looked
        # fields[0] is the state (Z: ended, waiting to be reaped), fields[1] the parent's pid.
        if int(fields[1]) == me and fields[0] != b"Z" and WORKER_MODULE.encode() in argv:
            found.add(int(entry))
    return found


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout_s`` passed; whether it held."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
