"""Run a statement on another thread and wait until it is inside SQLite, to Stop it from here."""

from __future__ import annotations

import threading
import time

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


def wait_until_busy(db: ReadOnlyDatabase, thread: threading.Thread) -> None:
    """Return once the statement runs; fail if it ended before it could be interrupted."""
    while not db.busy:
        assert thread.is_alive(), "the query ended before it could be interrupted"
        time.sleep(0.005)
