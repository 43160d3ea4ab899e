"""Short jobs (run SQL, load a schema, count rows, export) on a QThreadPool.

Each job is a QRunnable with a separate signals object (superqt's ``WorkerBase``, Anki's task
manager): a runnable is not a QObject, and the signals object lives on the UI thread so that its
signals reach UI slots through queued connections.  Every job catches everything and emits
``failed``; nothing dies silently.  The pool remembers the cancel flag of every running job so
that closing a window can cancel them all and wait for the threads to finish.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from sqale_desktop.core.errors import is_known

log = logging.getLogger(__name__)

# Every pool and worker thread the UI starts, so tests can fail when one is left running
# (napari's conftest does the same).
_registry: weakref.WeakSet[Any] = weakref.WeakSet()


def register_thread_owner(owner: Any) -> None:
    """Remember something with an ``is_busy()`` method (a pool, a worker thread)."""
    _registry.add(owner)


def busy_thread_owners() -> list[Any]:
    """Pools with running jobs and worker threads still running."""
    return [owner for owner in list(_registry) if owner.is_busy()]


Job = Callable[["JobContext"], Any]


class JobContext:
    """What a running job can see: its cancel flag and a way to report progress."""

    def __init__(self, signals: WorkerSignals) -> None:
        self.cancel = threading.Event()
        self.finished = False  # set on the worker thread when the job has returned or raised
        self.signals = signals
        self._lock = threading.Lock()
        self._on_cancel: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()

    def progress(self, value: object) -> None:
        """Report progress; delivered to the UI thread through a queued connection."""
        self.signals.progress.emit(value)

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` (e.g. a connection's ``interrupt``) when the job is cancelled.

        Cancellation does not travel through an event loop: the job is busy in SQLite, so the
        canceller interrupts the query directly from its own thread.
        """
        with self._lock:
            self._on_cancel.append(callback)
            already = self.cancel.is_set()
        if already:
            callback()

    def request_cancel(self) -> None:
        with self._lock:
            self.cancel.set()
            callbacks = list(self._on_cancel)
        for callback in callbacks:
            try:
                callback()
            except Exception:  # interrupting a connection that just closed is harmless
                log.debug("cancel callback failed", exc_info=True)


class WorkerSignals(QObject):
    """Signals of one job.

    Signals:
        finished(object): the job's return value.
        failed(object): the exception it raised (known conditions have a people-readable str()).
        progress(object): whatever the job reports through ``JobContext.progress``.
        done(): emitted last, after finished or failed, whatever happened.
    """

    finished = Signal(object)
    failed = Signal(object)
    progress = Signal(object)
    done = Signal()


class _Runnable(QRunnable):
    def __init__(self, job: Job, signals: WorkerSignals, context: JobContext, pool: TaskPool) -> None:
        super().__init__()
        self._job = job
        self._signals = signals
        self._context = context
        self._pool = pool

    def run(self) -> None:
        if not self._pool._started(self._context):
            # The pool is shutting down: the job never starts and reports no result (the window
            # that would receive it is closing); ``done`` still releases its signals object.
            self._context.finished = True
            self._pool._forget(self._context)
            self._signals.done.emit()
            return
        try:
            result = self._job(self._context)
        except BaseException as exc:  # every worker reports everything; nothing dies silently
            if not is_known(exc):
                log.exception("background job %s failed", getattr(self._job, "__qualname__", self._job))
            self._signals.failed.emit(exc)
        else:
            self._signals.finished.emit(result)
        finally:
            self._context.finished = True
            self._pool._forget(self._context)
            self._signals.done.emit()


class TaskPool(QObject):
    """A private QThreadPool that can cancel and join every job it started.

    It keeps each job's signals object alive until the job's last signal reached the UI thread.
    """

    def __init__(self, max_threads: int = 2, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(max_threads)
        self._lock = threading.Lock()
        self._running: set[JobContext] = set()
        # Jobs handed to Qt that no thread has picked up yet: shutdown takes them back.
        self._queued: dict[JobContext, _Runnable] = {}
        self._alive: set[WorkerSignals] = set()
        # Set (under the lock) when shutdown begins: from then on no job starts, whether a thread
        # picks it up from the queue or someone calls start() while the window closes.
        self._closing = False
        register_thread_owner(self)

    def start(
        self,
        job: Job,
        finished: Callable[[Any], None] | None = None,
        failed: Callable[[BaseException], None] | None = None,
        progress: Callable[[Any], None] | None = None,
    ) -> JobContext:
        """Queue ``job``; the callbacks run on the UI thread (connected before the job starts).

        After :meth:`shutdown` the job is not queued: its context comes back cancelled and
        finished, and none of the callbacks ever runs (a reply delivered while the window closes,
        such as an opened file, must not start work that outlives the window).
        """
        signals = WorkerSignals()
        context = JobContext(signals)
        with self._lock:
            closing = self._closing
        if closing:
            context.request_cancel()
            context.finished = True
            return context
        if finished is not None:
            signals.finished.connect(finished)
        if failed is not None:
            signals.failed.connect(failed)
        if progress is not None:
            signals.progress.connect(progress)
        with self._lock:
            self._running.add(context)
            self._alive.add(signals)
        signals.done.connect(self._release)
        runnable = _Runnable(job, signals, context, self)
        with self._lock:
            self._queued[context] = runnable
        self._pool.start(runnable)
        return context

    def _started(self, context: JobContext) -> bool:
        """A thread picked the job up: True when it may run (the pool is not shutting down)."""
        with self._lock:
            self._queued.pop(context, None)
            return not self._closing

    def _forget(self, context: JobContext) -> None:
        with self._lock:
            self._running.discard(context)

    @Slot()
    def _release(self) -> None:
        signals = self.sender()
        with self._lock:
            self._alive.discard(signals)

    def active_jobs(self) -> int:
        with self._lock:
            return len(self._running)

    def is_busy(self) -> bool:
        if not shiboken6.isValid(self._pool):
            return False  # a deleted QThreadPool waited for its threads in its destructor
        return self.active_jobs() > 0 or self._pool.activeThreadCount() > 0

    def wait(self, timeout_ms: int = 10_000) -> bool:
        """Wait for queued and running jobs to finish (without cancelling them)."""
        return bool(self._pool.waitForDone(timeout_ms))

    def cancel_all(self) -> None:
        with self._lock:
            contexts = list(self._running)
        for context in contexts:
            context.request_cancel()

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Stop starting jobs, drop queued ones, cancel running ones and wait for them; True when
        all ended.

        The closing flag is set first, under the lock a thread takes before it starts a job: a
        thread that the cancelled job frees finds it set and does not start a queued one.  A
        dropped job never runs, so it is marked finished and forgotten (``QThreadPool.clear``
        would drop it silently and leave it counted as running, its page busy for ever).
        """
        with self._lock:
            self._closing = True
            queued = list(self._queued.items())
        if shiboken6.isValid(self._pool):
            for context, runnable in queued:
                if self._pool.tryTake(runnable):  # False: a thread has it; it sees the flag and skips
                    self._drop(context)
        self.cancel_all()
        if not shiboken6.isValid(self._pool):
            return True
        return bool(self._pool.waitForDone(timeout_ms))

    def _drop(self, context: JobContext) -> None:
        """A queued job taken back: it never runs, so nothing will emit its ``done``."""
        context.request_cancel()
        context.finished = True
        with self._lock:
            self._queued.pop(context, None)
            self._running.discard(context)
            self._alive.discard(context.signals)
