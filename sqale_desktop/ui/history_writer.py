"""Writes to the conversation history off the UI thread, one at a time, in the order asked.

Saving a finished episode (``History.finish_episode``: its JSON and a SQLite transaction) took
~36 ms on the UI thread the moment the answer ended, one of the worst stalls while an episode
streamed (``benchmarks/ui.py``; issue 32).  The writes run here on one thread of a private
``QThreadPool`` (one thread, so they land in the order they were asked, and a later write about
the same entry never overtakes an earlier one); what follows a write (``then``) runs on the UI
thread after it, in the same order.

Nothing is lost at quit: :meth:`HistoryWriter.flush` waits for every write asked so far and runs
what follows them, and the window calls it while it shuts down.  A write that fails is logged, as
history trouble never stops the app; what follows it still runs.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

import shiboken6
from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from sqale_desktop.ui.workers import register_thread_owner

log = logging.getLogger(__name__)


class HistoryWriter(QObject):
    """One writer thread for the history; ``submit`` a write and what follows it on the UI thread.

    Signals:
        written(): a write is over (emitted on the writer thread; queued to the UI thread).
    """

    written = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)  # one thread: the writes land in the order they were asked
        self._lock = threading.Lock()
        self._asked = 0
        self._over: collections.deque[Callable[[], None]] = collections.deque()
        self.written.connect(self._follow)
        register_thread_owner(self)

    def submit(self, write: Callable[[], None], then: Callable[[], None]) -> None:
        """Run ``write`` on the writer thread, then ``then`` on the UI thread (each in order)."""
        with self._lock:
            self._asked += 1
        self._pool.start(_Write(self, write, then))

    def pending(self) -> int:
        """Writes asked whose ``then`` has not run yet."""
        with self._lock:
            return self._asked

    def flush(self, timeout_ms: int = 30_000) -> bool:
        """Wait for every write asked so far and run what follows them; True when all are over.

        It blocks: only for quitting (the history must have what was asked), never while the
        window runs.
        """
        done = not shiboken6.isValid(self._pool) or bool(self._pool.waitForDone(timeout_ms))
        self._follow()
        return done

    def is_busy(self) -> bool:
        """Writes are asked and not over.  (The pool's thread itself may still be returning from
        the last one, a moment after its ``then`` ran; it holds nothing then.)"""
        return self.pending() > 0

    def shutdown(self) -> bool:
        """The thread registry's way to end a writer left running (tests): what :meth:`flush` does."""
        return self.flush()

    def _wrote(self, then: Callable[[], None]) -> None:
        """On the writer thread: a write is over; ``then`` waits for the UI thread."""
        with self._lock:
            self._over.append(then)
        self.written.emit()

    @Slot()
    def _follow(self) -> None:
        """On the UI thread: run what follows each write that is over, in order."""
        while True:
            with self._lock:
                if not self._over:
                    return
                then = self._over.popleft()
                self._asked -= 1
            then()


class _Write(QRunnable):
    def __init__(self, writer: HistoryWriter, write: Callable[[], None], then: Callable[[], None]) -> None:
        super().__init__()
        self._writer = writer
        self._write = write
        self._then = then

    def run(self) -> None:
        try:
            self._write()
        except Exception as exc:  # history trouble must not stop the app; it is logged
            log.warning("could not write to the history: %s", exc)
        finally:
            self._writer._wrote(self._then)
