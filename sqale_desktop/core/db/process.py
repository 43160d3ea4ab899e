"""The app's side of the database worker: starting, calling, killing and pooling worker processes.

A :class:`WorkerProcess` is one child running ``worker.py``.  ``call`` sends a request and waits
for its reply while watching the clock and the caller's Stop: on Stop it sends the worker's Stop
signal (again every poll, so that one landing between requests is not lost), and when the worker
still has not answered ``KILL_GRACE_S`` after the deadline or the Stop (one long C call that no
progress handler or ``sqlite3_interrupt`` reaches) it kills the process and raises
:class:`WorkerGone`.  A worker that dies on its own (a segfault) raises it too, with the signal.

Pool: a worker is leased to one thread of one open database (``link.Links``) and given back when
that link closes, so one process serves many databases one after another (the evaluation's scorer
opens a file per statement: a fresh process each time would cost ~100 ms).  One spare is kept
started in the background so that a lease, and the replacement of a killed worker, seldom waits
for a process to start; nothing starts before the first database opens (startup is unchanged).
Why one worker per thread and database rather than one per database: the app runs a database's
statements on several threads at once (the agent's tools, the SQL panel, the grid's pages, the
schema tree), and one process per database would queue them behind each other, so a runaway
query in the panel would stall the agent.

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
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from sqale_desktop.core.db import worker as worker_module
from sqale_desktop.core.errors import KnownError

# Seconds past the deadline (or a Stop) before the worker is killed: the worker's own backstop
# interrupts at ``watchdog.GRACE_S``; this leaves it time to answer the normal way first.
KILL_GRACE_S = 0.5
# How often a waiting caller looks at its Stop flag and the clock (the reply itself wakes it at once):
# part of the time from Stop to the statement's end.
POLL_S = 0.005
# The worker's memory cap (``RLIMIT_AS``, address space) unless ``set_memory_limit_mb`` says otherwise.
DEFAULT_MEMORY_LIMIT_MB = 2048
# Spare workers kept started; more idle ones are ended when given back.
MAX_IDLE = 2


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

    def __init__(self, memory_mb: int) -> None:
        from sqale_desktop.core.models.convert.child import child_command, child_env

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
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=2.0)
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._requests.close()
        self._replies.close()

    def end(self) -> None:
        """End an idle worker: closing its stdin ends its loop; killed if it does not exit at once."""
        if self._closed:
            return
        self._closed = True
        self._requests.close()
        try:
            self._proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._replies.close()

    def _gone(self) -> WorkerGone:
        if self.kill_reason is not None:
            return WorkerGone(self.kill_reason)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=2.0)
        code = self._proc.poll()
        if code is not None and code < 0:
            try:
                detail = signal.Signals(-code).name
            except ValueError:
                detail = f"signal {-code}"
        else:
            detail = f"exit status {code}" if code is not None else "no reply"
        return WorkerGone("crashed", detail)


class WorkerPool:
    """Idle workers ready to be leased, and the spare started in the background."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[WorkerProcess] = []
        self._starting = False
        self._closed = False
        self.memory_mb = DEFAULT_MEMORY_LIMIT_MB

    def lease(self) -> WorkerProcess:
        """An idle worker (a new one if none is ready); a spare is started behind it."""
        with self._lock:
            while self._idle:
                candidate = self._idle.pop()
                if candidate.alive and candidate.memory_mb == self.memory_mb:
                    break
                candidate.end()
            else:
                candidate = None
        worker = candidate if candidate is not None else WorkerProcess(self.memory_mb)
        self.prestart()
        return worker

    def give_back(self, worker: WorkerProcess) -> None:
        """Take back a worker whose session is closed; ended instead when enough are idle."""
        with self._lock:
            keep = (
                not self._closed
                and worker.alive
                and worker.memory_mb == self.memory_mb
                and len(self._idle) < MAX_IDLE
            )
            if keep:
                self._idle.append(worker)
        if not keep:
            worker.end()

    def prestart(self) -> None:
        """Start a spare worker in the background unless one is idle or starting already."""
        with self._lock:
            if self._closed or self._idle or self._starting:
                return
            self._starting = True
        threading.Thread(target=self._start_spare, name="db-worker-start", daemon=True).start()

    def _start_spare(self) -> None:
        try:
            spare = WorkerProcess(self.memory_mb)
        except OSError:
            return  # the lease that needs one will try again and report the error
        finally:
            with self._lock:
                self._starting = False
        self.give_back(spare)

    def close(self) -> None:
        """End every idle worker (at exit)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.end()


POOL = WorkerPool()
atexit.register(POOL.close)


def set_memory_limit_mb(memory_mb: int) -> None:
    """The memory cap of workers started from now on (idle ones are replaced on their next lease)."""
    POOL.memory_mb = int(memory_mb)
