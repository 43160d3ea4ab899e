"""The worker's backstop behind the progress handler: ``sqlite3_interrupt`` past the deadline.

The progress handler is called every ``session.PROGRESS_STEPS`` VM instructions, which is every
few milliseconds for ordinary work.  A statement whose few instructions are each expensive (a row
of ``count(zeroblob(6e7))`` is ten instructions and 100 ms) can go seconds between calls.
``sqlite3_interrupt`` is checked at every jump of the VM instead, so it stops such a statement
within one row: the backstop calls it when a statement is still running ``GRACE_S`` past its
deadline.  That is the normal way; what even this cannot reach (one long C call) the app ends by
killing the worker a little later (``process.KILL_GRACE_S``).

One daemon thread in the worker, asleep while nothing runs.
"""

from __future__ import annotations

import sqlite3
import threading
import time

GRACE_S = 0.1


class Backstop:
    """Interrupts the armed connection once ``GRACE_S`` past its deadline, unless disarmed first."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._conn: sqlite3.Connection | None = None
        self._deadline: float | None = None
        self.fired = False
        self._thread = threading.Thread(target=self._run, name="sqlite-backstop", daemon=True)
        self._thread.start()

    def arm(self, conn: sqlite3.Connection, deadline: float) -> None:
        with self._cond:
            self._conn = conn
            self._deadline = deadline
            self.fired = False
            self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._deadline = None
            self._conn = None

    def _run(self) -> None:
        with self._cond:
            while True:
                if self._deadline is None or self._conn is None:
                    self._cond.wait()
                    continue
                delay = self._deadline + GRACE_S - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                self.fired = True
                self._conn.interrupt()
                self._deadline = None
