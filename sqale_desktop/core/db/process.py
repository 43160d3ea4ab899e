"""The app's side of the database worker: starting, calling, killing and pooling worker processes.

A :class:`WorkerProcess` is one child running ``worker.py``.  ``call`` sends a request and waits
for its reply while watching the clock and the caller's Stop: on Stop it sends the worker's Stop
signal (again every poll, so that one landing between requests is not lost), and when the worker
still has not answered ``KILL_GRACE_S`` after the deadline or the Stop (one long C call that no
progress handler or ``sqlite3_interrupt`` reaches) it kills the process and raises
:class:`WorkerGone`.  A worker that dies on its own (a segfault) raises it too, with the signal.

Pool (``WorkerPool``): every worker of the app, under one cap (``MAX_WORKERS``).  A worker is
leased for one step of work on one database, or for the life of a paged cursor, and then held idle
with its session still open, so the next step on that database, from whichever thread, takes it
back at once; a second step running at the same time leases a second worker, so a runaway query
in the panel never stalls the agent's tools.  At the cap a lease takes the least recently used idle
worker of any database (a cursor between pages resumes later in another worker), and waits only
while every worker runs a step.  Idle workers are ended after ``IDLE_S``; one spare without a
session is kept started while databases open, since a lease that finds it skips the ~100 ms start.
Seventeen tabs had 45 workers (1.45 GB) when each thread of each database kept its own.

Replies are unpickled with a restricted unpickler that builds plain values only (tuples, lists,
str, bytes, numbers, None): the worker runs SQLite on hostile files, and what comes back from it
must not be able to name a class or function in the app.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import pickle
import subprocess
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Protocol

from sqale_desktop.core.child.supervise import KILL_GRACE_S, signal_name
from sqale_desktop.core.child.supervise import memory_limit_mb as child_memory_limit_mb
from sqale_desktop.core.child.supervise import set_memory_limit_mb as set_child_memory_limit_mb
from sqale_desktop.core.db import worker as worker_module
from sqale_desktop.core.errors import KnownError

# KILL_GRACE_S, seconds past the deadline (or a Stop) before the worker is killed, is the child
# kit's one figure: the worker's own backstop interrupts at ``watchdog.GRACE_S``; this leaves it
# time to answer the normal way first.
# How often a waiting caller looks at its Stop flag and the clock (the reply itself wakes it at once):
# part of the time from Stop to the statement's end.
POLL_S = 0.005
# Worker processes alive at once, across every open database (each is a Python process of about
# 30 MB): past it a lease takes an idle worker from another database, or waits for one.
MAX_WORKERS = 8
# Seconds a worker may stay idle (its session open, or a spare) before it is ended.
IDLE_S = 30.0
# How often the reaper looks for idle workers.
REAP_EVERY_S = 1.0
# Workers without a session kept started, so that a lease seldom waits for a process to start.
SPARES = 1


class WorkerGone(KnownError):
    """The worker ended under a request: ``reason`` is "timeout", "stopped", "closed" or "crashed".

    ``core.db.link`` turns it into the caller's error (time limit, cancelled, crashed worker); it is
    a ``KnownError`` like every error family of core, so one that ever escaped reads as a message."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"the database worker sent a {module}.{name}: refused")


def plain_loads(data: bytes) -> Any:
    """Unpickle ``data`` allowing built-in values only (no class or function is looked up)."""
    return _PlainUnpickler(io.BytesIO(data)).load()


class WorkerProcess:
    """One database worker process; ``call`` is used by one thread at a time (the link's lock)."""

    def __init__(self, memory_mb: int, on_end: Callable[[WorkerProcess], None] | None = None) -> None:
        from sqale_desktop.core.child.launch import child_command, child_env

        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        try:
            self._proc = subprocess.Popen(
                child_command(worker_module.MODULE, str(memory_mb)),
                stdin=request_read,
                stdout=reply_write,
                env=child_env(),
                start_new_session=True,  # Ctrl+C in a terminal is the app's, not the worker's
            )
        except BaseException:
            for fd in (request_read, request_write, reply_read, reply_write):
                os.close(fd)
            raise
        os.close(request_read)
        os.close(reply_write)
        self._requests = Connection(request_write, readable=False)
        self._replies = Connection(reply_read, writable=False)
        self.pid = self._proc.pid
        self.memory_mb = memory_mb
        self.kill_reason: str | None = None
        self._closed = False
        self._on_end = on_end

    @property
    def alive(self) -> bool:
        return not self._closed and self.kill_reason is None and self._proc.poll() is None

    def call(self, request: tuple[Any, ...], deadline: float, should_stop: Callable[[], bool]) -> Any:
        """Send ``request`` and return its reply; raise ``WorkerGone`` if the worker ends first."""
        try:
            self._requests.send_bytes(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:
            raise self._gone() from None
        stop_at: float | None = None
        while True:
            try:
                ready = self._replies.poll(POLL_S)
                if ready:
                    return plain_loads(self._replies.recv_bytes())
            except (EOFError, OSError):
                raise self._gone() from None
            now = time.monotonic()
            if should_stop():
                stop_at = now if stop_at is None else stop_at
                self.signal_stop()
                if now > stop_at + KILL_GRACE_S:
                    self.kill("stopped")
                    raise WorkerGone("stopped")
            if now > deadline + KILL_GRACE_S:
                self.kill("timeout")
                raise WorkerGone("timeout")

    def send(self, request: tuple[Any, ...]) -> None:
        """Send a request that has no reply."""
        self._requests.send_bytes(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL))

    def signal_stop(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, worker_module.STOP_SIGNAL)

    def kill(self, reason: str) -> None:
        """End the process now (any thread); a caller waiting on it gets ``WorkerGone(reason)``."""
        if self.kill_reason is None:
            self.kill_reason = reason
        with contextlib.suppress(OSError):
            self._proc.kill()

    def wait_ended(self, timeout_s: float = 2.0) -> None:
        """Wait (from any thread) until a killed process has ended; its pipes stay for the reaper."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=timeout_s)

    def reap(self) -> None:
        """Wait for the ended process and close the pipes (call where no other thread uses them)."""
        if not self._mark_closed():
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=2.0)
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._requests.close()
        self._replies.close()

    def end(self, wait: bool = True) -> None:
        """End an idle worker: closing its stdin ends its loop; killed if it does not exit at once.

        ``wait=False`` only closes the stdin; ``finish`` then waits (``end_all`` ends many so)."""
        if not self._mark_closed():
            return
        self._requests.close()
        if wait:
            self.finish(0.5)

    def finish(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for an ended worker to exit, then kill it; close its pipe."""
        try:
            self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if not self._replies.closed:
            self._replies.close()

    @property
    def exited(self) -> bool:
        """Whether the process has ended (it is reaped by the check)."""
        return self._proc.poll() is not None

    def _mark_closed(self) -> bool:
        """Mark the worker ended once (the pool counts it out); False if it already was."""
        if self._closed:
            return False
        self._closed = True
        if self._on_end is not None:
            self._on_end(self)
        return True

    def _gone(self) -> WorkerGone:
        if self.kill_reason is not None:
            return WorkerGone(self.kill_reason)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=2.0)
        code = self._proc.poll()
        if code is not None and code < 0:
            detail = signal_name(-code)
        else:
            detail = f"exit status {code}" if code is not None else "no reply"
        return WorkerGone("crashed", detail)


class Holder(Protocol):
    """Something that holds an idle worker and can give it up: a database's parked link, or the
    link under a paged cursor between two pages (``link.Link``)."""

    def reclaim(self) -> WorkerProcess | None:
        """Give up the worker now, its session closed; None when it is in use at this moment."""


class WorkerPool:
    """Every database worker of the app: a global cap, the idle ones reaped, one spare.

    A worker is leased for one step of work (or for the life of a paged cursor) and comes back
    idle, its session still open on its database (``hold``): the next step on that database
    takes it back without opening the file again (``take``).  Past ``max_workers`` a lease takes
    the idle worker used least recently, from whichever database holds it (the holder gives it
    up: a parked link simply goes, a cursor between pages resumes in another worker later), and
    waits for one only when every worker is running a step (each ends within its time limit).
    A worker idle ``IDLE_S`` is ended; one spare without a session is kept started while a
    database is open, since a lease that finds it skips the process start (~100 ms).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._spares: list[tuple[WorkerProcess, float]] = []
        # Idle holders, least recently used first: dicts keep their insertion order.
        self._held: dict[Holder, float] = {}
        self._count = 0  # live workers, leased or idle, and those starting
        # Ended workers not yet exited: nobody waits for them (the reaper and close() collect
        # them), so closing many databases at quit costs no process exit each.
        self._ending: list[WorkerProcess] = []
        self._starting = False
        self._closed = False
        self._reaper: threading.Thread | None = None
        self.max_workers = MAX_WORKERS
        self.idle_s = IDLE_S

    @property
    def memory_mb(self) -> int:
        """The cap of workers started now: the one figure every child of the app runs under
        (``core.child``'s, from the settings' ``query_memory_limit_mb``)."""
        return child_memory_limit_mb()

    @property
    def count(self) -> int:
        """Worker processes alive now (leased, idle or starting)."""
        with self._lock:
            return self._count

    def lease(
        self, should_stop: Callable[[], bool] = lambda: False, deadline: float | None = None
    ) -> WorkerProcess:
        """A worker without a session: a spare, a new one, or one an idle holder gives up.

        Raises ``WorkerGone("stopped")`` when ``should_stop`` turns True and
        ``WorkerGone("timeout")`` past ``deadline`` while every worker runs a step.
        """
        self._start_reaper()
        while True:
            ended: list[WorkerProcess] = []
            with self._lock:
                if self._closed:
                    raise WorkerGone("closed")
                worker: WorkerProcess | None = None
                while self._spares and worker is None:
                    candidate, _ = self._spares.pop()
                    if candidate.alive and candidate.memory_mb == self.memory_mb:
                        worker = candidate
                    else:
                        ended.append(candidate)
                start = worker is None and self._count - len(ended) < self.max_workers
                if start:
                    self._count += 1
                holders = [] if worker is not None or start else list(self._held)
            for old in ended:
                old.end()
            if worker is not None:
                return worker
            if start:
                return self._new_worker()
            for holder in holders:
                if self.take(holder):
                    given = holder.reclaim()
                    if given is not None:
                        if given.memory_mb == self.memory_mb:
                            return given
                        given.end()
                        break  # its place is free now: start one of the right size
            else:
                with self._lock:
                    if not self._spares and self._count >= self.max_workers and not self._closed:
                        self._cond.wait(POLL_S * 10)
            if should_stop():
                raise WorkerGone("stopped")
            if deadline is not None and time.monotonic() > deadline:
                raise WorkerGone("timeout")

    def _new_worker(self) -> WorkerProcess:
        """Start a worker in the place ``lease`` counted for it (given back if starting fails)."""
        try:
            return WorkerProcess(self.memory_mb, on_end=self._ended)
        except BaseException:
            with self._lock:
                self._count -= 1
                self._cond.notify_all()
            raise

    def hold(self, holder: Holder) -> None:
        """``holder`` has an idle worker now (most recently used); reclaimable from now on."""
        with self._lock:
            if self._closed:
                return
            self._held.pop(holder, None)
            self._held[holder] = time.monotonic()
            self._cond.notify_all()

    def take(self, holder: Holder) -> bool:
        """Take ``holder`` out of the idle ones: True if it was there (nobody reclaims it now)."""
        with self._lock:
            return self._held.pop(holder, None) is not None

    def give_back(self, worker: WorkerProcess) -> None:
        """Take back a worker whose session is closed: the spare, or ended."""
        with self._lock:
            keep = (
                not self._closed
                and worker.alive
                and worker.memory_mb == self.memory_mb
                and len(self._spares) < SPARES
            )
            if keep:
                self._spares.append((worker, time.monotonic()))
                self._cond.notify_all()
            else:
                self._ending.append(worker)
        if not keep:
            worker.end(wait=False)

    def prestart(self) -> None:
        """Start the spare in the background unless one is there or starting, or the cap is reached."""
        with self._lock:
            if self._closed or self._spares or self._starting or self._count >= self.max_workers:
                return
            self._starting = True
            self._count += 1
        threading.Thread(target=self._start_spare, name="db-worker-start", daemon=True).start()

    def _start_spare(self) -> None:
        try:
            spare = self._new_worker()
        except OSError:
            return  # the lease that needs one will try again and report the error
        finally:
            with self._lock:
                self._starting = False
        self.give_back(spare)

    def _ended(self, worker: WorkerProcess) -> None:
        with self._lock:
            self._count -= 1
            self._cond.notify_all()

    def _start_reaper(self) -> None:
        with self._lock:
            if self._reaper is not None or self._closed:
                return
            self._reaper = threading.Thread(target=self._reap, name="db-worker-reaper", daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        """End what has been idle ``idle_s``: held workers first (given up), then the spare."""
        while True:
            with self._lock:
                self._cond.wait(REAP_EVERY_S)
                if self._closed:
                    return
                now = time.monotonic()
                stale = [h for h, since in self._held.items() if now - since > self.idle_s]
                for holder in stale:
                    del self._held[holder]
                old = [w for w, since in self._spares if now - since > self.idle_s]
                self._spares = [(w, since) for w, since in self._spares if w not in old]
                exited = [w for w in self._ending if w.exited]
                self._ending = [w for w in self._ending if w not in exited]
            for worker in exited:
                worker.finish(0)
            for holder in stale:
                given = holder.reclaim()
                if given is not None:
                    self.give_back(given)
            for worker in old:
                worker.end()

    def close(self) -> None:
        """End every idle worker (at exit), all at once: each closed stdin ends its process."""
        with self._lock:
            self._closed = True
            spares, self._spares = [w for w, _ in self._spares], []
            holders, self._held = list(self._held), {}
            ending, self._ending = self._ending, []
            self._cond.notify_all()
        workers = spares + [w for h in holders if (w := h.reclaim()) is not None]
        end_all(workers + ending)


def end_all(workers: list[WorkerProcess], timeout_s: float = 1.0) -> None:
    """End idle workers together: every stdin closed first, then each waited for (killed past
    ``timeout_s`` in all), so that N workers take as long as one, not N times as long."""
    for worker in workers:
        worker.end(wait=False)
    deadline = time.monotonic() + timeout_s
    for worker in workers:
        worker.finish(max(0.0, deadline - time.monotonic()))


POOL = WorkerPool()
atexit.register(POOL.close)


def set_memory_limit_mb(memory_mb: int) -> None:
    """The memory cap of workers, and of every other child, started from now on (idle workers
    are replaced on their next lease)."""
    set_child_memory_limit_mb(memory_mb)
