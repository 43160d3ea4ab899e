"""The backstop behind the progress handler: ``sqlite3_interrupt`` for a statement that runs on.

The progress handler is called every ``link.PROGRESS_STEPS`` VM instructions, which is every few
milliseconds for ordinary work.  A statement whose few instructions are each expensive (a row of
``count(zeroblob(6e7))`` is ten instructions and 100 ms) can go seconds between calls, and the
time limit and Stop with it.  ``sqlite3_interrupt`` is checked at every jump of the VM instead,
so it stops such a statement within one row; but it hits every statement running on the
connection at that moment, which is why it is only the backstop: the watchdog calls it when a
statement is still running ``GRACE_S`` past its deadline or past a Stop.  The connection is then
retired (see ``link.Links._backstop``), so no later statement inherits the interrupt.

One daemon thread per database, asleep while nothing runs, ended by ``stop()``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

GRACE_S = 0.1
POLL_S = 0.02


class Watchdog:
    """Calls ``scan()`` every ``POLL_S`` while it returns True (something is running)."""

    def __init__(self, scan: Callable[[], bool]) -> None:
        self._scan = scan
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def work_started(self) -> None:
        """A statement started: watch until nothing runs (the thread starts on first use)."""
        with self._lock:
            if self._stopped:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sqlite-watchdog", daemon=True)
                self._thread.start()
        self._wake.set()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            if self._stopped:
                return
            self._wake.clear()
            if self._scan():
                self._wake.set()  # keep watching
                threading.Event().wait(POLL_S)
