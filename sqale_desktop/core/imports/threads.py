"""The threads an import starts beside it (Arrow's reader, the ADBC writer, the source's hash),
waited for without ``Thread.join``.

On CPython before 3.13, a KeyboardInterrupt that interrupts ``Thread.join()`` can mark the thread
as ended while it still runs (python/cpython#90882: ``_wait_for_tstate_lock`` releases the lock
the running thread holds).  The import then returned, its caller exited, and the interpreter
finalised under a thread still inside Arrow's or ADBC's code: "Fatal Python error:
PyGILState_Release ... Python runtime state: finalizing".  ``benchmarks/ctrl_c_imports.py``
measured a thread left running after 8 of 40 Ctrl+C, and a crash after 1 of 30.  An
``Event`` the thread sets as its last act is not corrupted by an interrupted wait, so the import
waits on that instead, through any number of Ctrl+C, before it lets the first one go up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class ImportThread:
    """A daemon thread running ``target``, with the event it sets when ``target`` has returned."""

    def __init__(self, target: Callable[[], None], name: str) -> None:
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(target,), name=name, daemon=True)

    def _run(self, target: Callable[[], None]) -> None:
        try:
            target()
        finally:
            self.ended.set()

    def start(self) -> None:
        self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    @property
    def name(self) -> str:
        """The thread's name (``import-read``, ``import-write``…), as tracebacks and debuggers show it."""
        return self._thread.name

    def wait(self, timeout: float) -> bool:
        """Whether the thread ended within ``timeout`` seconds (a Ctrl+C here goes up)."""
        return self.ended.wait(timeout)


def stop_and_wait(stop: threading.Event, *threads: ImportThread) -> None:
    """Set ``stop`` and wait until every started thread of ``threads`` has ended, whatever Ctrl+C
    comes meanwhile: the first is on its way up already, and each thread ends within a batch once
    ``stop`` is set.  (A second Ctrl+C exactly between two waits could still go up; on POSIX no
    more can be done short of blocking the signal.)"""
    while True:
        try:
            stop.set()
            for thread in threads:
                if thread.started:
                    thread.ended.wait()
            return
        except KeyboardInterrupt:
            continue
