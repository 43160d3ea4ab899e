"""The parent's side of a child: a deadline, Stop, one grace before the kill, death in words.

:func:`run` starts a child module (:mod:`.launch`), sends it its plan and reads its messages
(:mod:`.messages`) until ``done``, ``error`` or its end, while watching the clock and the caller's
Stop (a ``threading.Event``, polled every :data:`POLL_S`).  On Stop the child is killed at once:
everything it wrote is in the caller's scratch (removed by the caller) or in the private temporary
folder :func:`run` gives it (removed here), so nothing needs its cooperation and a child inside one
long C call stops as quickly as one between two rows.  Past a deadline it is given
:data:`KILL_GRACE_S` to end the normal way (its own time limit's message is better than ours),
then killed.  ``start_s`` bounds the time until its first message (an interpreter and the core's
imports, slow on a busy computer); ``step_s``, when given, the time between two messages
(``step``, ``alive`` and ``progress`` restart it); ``total_s`` the whole run.

A child that dies is described in words for the message people see: the signal
(``SIGSEGV``, ``SIGABRT``), the memory cap when that is what it met (a ``MemoryError`` in Python, or
an allocator's own words on stderr before an abort), the deadline it ran past.  Every error here
is a :class:`KnownError` whose text begins with what died (the caller's ``what``).

The child gets its own session (POSIX) or process group (Windows), so Ctrl+C in a terminal is the
parent's alone: the parent's handler sets Stop and the kill follows.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqale_desktop.core.child import forks
from sqale_desktop.core.child.launch import child_command, child_env
from sqale_desktop.core.child.messages import Message
from sqale_desktop.core.errors import KnownError

# Past a deadline, how long the child has to end the normal way before it is killed (one figure
# for every child, the database worker's loop included).
KILL_GRACE_S = 0.5
POLL_S = 0.02  # how often the parent looks at Stop and the clock while no message comes
START_S = 30.0  # an interpreter and the core's imports, on a busy computer
DEFAULT_MEMORY_LIMIT_MB = 2048
_memory_mb = DEFAULT_MEMORY_LIMIT_MB
# Words an allocator leaves on stderr when it meets the cap before it aborts (Rust, C++, glibc).
_MEMORY_WORDS = ("memory allocation of", "std::bad_alloc", "MemoryError", "Cannot allocate memory",
                 "out of memory", "failed to allocate")  # fmt: skip


class ChildDied(KnownError):
    """The child ended without its answer: a signal, the memory cap, an exit; ``reason`` says which
    (``signal``, ``memory``, ``exit``, ``timeout``, ``stopped``)."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(text)
        self.reason = reason


class ChildTimedOut(ChildDied):
    """The child ran past its deadline and was killed."""


class ChildStopped(ChildDied):
    """Stop was set: the child was killed."""


class ChildFailed(KnownError):
    """The child answered with an error (``text`` is its message; ``kind``: known, memory, bug)."""

    def __init__(self, text: str, kind: str) -> None:
        super().__init__(text)
        self.kind = kind


def signal_name(number: int) -> str:
    """``SIGSEGV`` for 11: how a child's death by signal is named in every message."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def set_memory_limit_mb(memory_mb: int) -> None:
    """The children's memory cap from the settings (``query_memory_limit_mb``), the database
    workers' included (``core.db.process.set_memory_limit_mb`` sets it)."""
    global _memory_mb
    _memory_mb = int(memory_mb)


def memory_limit_mb() -> int:
    return _memory_mb


def run(
    module: str,
    plan: dict[str, Any],
    *,
    what: str,
    args: Sequence[str] = (),
    cancel: threading.Event | None = None,
    on_message: Callable[[Message], None] | None = None,
    on_stderr: Callable[[bytes], None] | None = None,
    memory_mb: int | None = -1,
    start_s: float = START_S,
    step_s: float | None = None,
    total_s: float | None = None,
    temp_parent: Path | None = None,
    spare: bool = False,
) -> Message:
    """Run ``module``'s ``child_main`` on ``plan``; return its ``done`` message.

    ``what`` names the work for the messages (``the import of sales.csv``).  ``on_message`` gets
    every ``step``/``progress``/``note`` message, in the calling thread.  ``on_stderr`` gets the
    child's stderr lines as they come (else stderr goes to a file, read only for the death
    message).  ``memory_mb``: the cap (-1: the settings' figure, None: none).  ``temp_parent``:
    where the child's private temporary folder is made (default: the system's).  ``spare``: run
    on a warm child: forked from the module's fork server (:mod:`.forks`, Linux), elsewhere one
    started ahead (:class:`_Spares`), the next one started when this ends.
    Raises :class:`ChildStopped`, :class:`ChildTimedOut`, :class:`ChildDied` or :class:`ChildFailed`.
    """
    cap = _memory_mb if memory_mb == -1 else memory_mb
    warm = spare and on_stderr is None
    started = None
    if warm and forks.available():
        started = _servers.fork(module, args, cap, temp_parent, cancel, start_s, what)
    elif warm:
        started = _spares.take(module, args, cap)
    if started is None:
        started = _Started(module, args, cap, temp_parent, on_stderr is not None)
    try:
        return _Supervised(started, plan, what, cancel, on_message, on_stderr, cap).run(
            start_s, step_s, total_s
        )
    finally:
        started.remove()
        if warm and not forks.available():
            _spares.start_soon(module, args, cap)


class _Started:
    """A started child, its private temporary folder and its stderr file; it waits for its plan."""

    def __init__(
        self,
        module: str,
        args: Sequence[str],
        memory_mb: int | None,
        temp_parent: Path | None,
        pipe: bool,
        server: forks.Server | None = None,
    ) -> None:
        self.key = (module, tuple(args), memory_mb, tempfile.gettempdir())
        self.temp = Path(tempfile.mkdtemp(prefix="sqale-child-", dir=temp_parent))
        self.errors = tempfile.TemporaryFile(dir=self.temp)  # noqa: SIM115  (closed by remove())
        self.proc: subprocess.Popen[bytes] | forks.Forked
        if server is not None:
            try:
                self.proc = self._fork(server)
            except BaseException:
                self.remove()
                raise
            return
        session: dict[str, Any] = (
            {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)}
            if sys.platform == "win32"
            else {"start_new_session": True}
        )
        try:
            self.proc = subprocess.Popen(
                child_command(module, *args),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if pipe else self.errors,
                env=child_env(memory_mb, self.temp),
                cwd=self.temp,  # a relative path the child writes lands in its temporary folder
                **session,
            )
        except BaseException:
            self.remove()
            raise

    def fits(self, module: str, args: Sequence[str], memory_mb: int | None) -> bool:
        """Whether this child, waiting for its plan, can run ``module`` with these arguments and
        cap: started for them under the current temporary folder, and still alive."""
        return (
            self.key == (module, tuple(args), memory_mb, tempfile.gettempdir()) and self.proc.poll() is None
        )

    def _fork(self, server: forks.Server) -> forks.Forked:
        """The child forked by ``server``, on pipes made here as ``Popen`` would make them."""
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        try:
            env = child_env(None, self.temp)
            forked = server.fork(stdin_r, stdout_w, self.errors.fileno(), env, self.temp)
        except BaseException:
            for fd in (stdin_w, stdout_r):
                os.close(fd)
            raise
        finally:
            for fd in (stdin_r, stdout_w):
                os.close(fd)
        forked.stdin = os.fdopen(stdin_w, "wb")
        forked.stdout = os.fdopen(stdout_r, "rb")
        return forked

    def end(self) -> None:
        """End a child that was never given its plan (a spare): kill, wait, remove."""
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2.0)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.remove()

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.errors.close()
        shutil.rmtree(self.temp, ignore_errors=True)


class _Spares:
    """One started child per kind, warming up (its imports) while it waits for the next plan.

    An importer child spends about a second importing Arrow and the readers' libraries: the one
    that runs the next import is started when the previous import ends, so that second is spent
    while a person looks at the result, not in the next import (the parent process paid it once
    per session before the importers moved into children)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[str, _Started] = {}
        self._starting: list[threading.Thread] = []

    def take(self, module: str, args: Sequence[str], memory_mb: int | None) -> _Started | None:
        with self._lock:
            spare = self._idle.pop(module, None)
        if spare is None:
            return None
        if spare.fits(module, args, memory_mb):
            return spare
        spare.end()  # another cap or temp folder since it started, or it died idle
        return None

    def start(self, module: str, args: Sequence[str], memory_mb: int | None) -> None:
        try:
            spare = _Started(module, args, memory_mb, None, False)
        except OSError:
            return  # no spare: the next run starts its own child
        with self._lock:
            old = self._idle.pop(module, None)
            self._idle[module] = spare
        if old is not None:
            old.end()

    def ensure(self, module: str, args: Sequence[str], memory_mb: int | None) -> None:
        """:meth:`start`, unless a spare of these arguments and cap waits already."""
        with self._lock:
            spare = self._idle.get(module)
        if spare is None or not spare.fits(module, args, memory_mb):
            self.start(module, args, memory_mb)

    def start_soon(self, module: str, args: Sequence[str], memory_mb: int | None) -> None:
        """:meth:`start` in a thread: the fork happens beside the caller's next step, not in its time."""
        thread = threading.Thread(
            target=self.start, args=(module, args, memory_mb), name="child-spare", daemon=True
        )
        with self._lock:
            self._starting = [t for t in self._starting if t.is_alive()] + [thread]
        thread.start()

    def discard(self) -> None:
        with self._lock:
            starting, self._starting = self._starting, []
        for thread in starting:
            thread.join(timeout=10.0)
        with self._lock:
            idle, self._idle = list(self._idle.values()), {}
        for spare in idle:
            spare.end()


class _Servers:
    """One fork server per module (:mod:`.forks`), started at the module's first warm run and
    kept for the app's life; a new one when the cap or arguments change or the old one ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: dict[str, forks.Server] = {}

    def fork(
        self,
        module: str,
        args: Sequence[str],
        memory_mb: int | None,
        temp_parent: Path | None,
        cancel: threading.Event | None,
        start_s: float,
        what: str,
    ) -> _Started | None:
        """A child forked from the module's server, once it is warm (Stop and ``start_s`` hold
        while it warms up); None where no server could serve (the caller starts one itself).

        A server found dead at the fork (killed since the last import, its end not yet seen) is
        replaced once at once: the import still gets a forked child."""
        for _attempt in range(2):
            server = self._server(module, args, memory_mb, request_follows=True)
            if server is None:
                return None
            try:
                stopped = cancel.is_set if cancel is not None else lambda: False
                if not server.wait_ready(time.monotonic() + start_s, stopped):
                    if stopped():
                        raise ChildStopped(f"{what} was stopped", "stopped")
                    raise ChildTimedOut(f"{what} did not start within {start_s:g} s", "timeout")
                return _Started(module, args, memory_mb, temp_parent, False, server)
            except forks.ServerGone:
                continue
        return None

    def _server(
        self, module: str, args: Sequence[str], memory_mb: int | None, request_follows: bool = False
    ) -> forks.Server | None:
        """The module's server for these arguments and cap, a new one if there is none alive
        (``request_follows``: started for a request, which it waits for before warming up)."""
        key = (module, tuple(args), memory_mb)
        old = None
        with self._lock:
            server = self._servers.get(module)
            if server is None or server.key != key or not server.alive:
                old = server
                try:
                    server = self._servers[module] = forks.Server(module, args, memory_mb, request_follows)
                except OSError:
                    self._servers.pop(module, None)
                    server = None
        if old is not None:
            old.end(wait=False)  # it ends once its children did (an import may still run there)
        return server

    def start(
        self, module: str, args: Sequence[str], memory_mb: int | None, request_follows: bool = False
    ) -> None:
        self._server(module, args, memory_mb, request_follows)

    def wait_warm(self, module: str, timeout: float) -> bool:
        with self._lock:
            server = self._servers.get(module)
        return server is not None and server.wait_warm(time.monotonic() + timeout)

    def cpu_s(self) -> float:
        with self._lock:
            servers = list(self._servers.values())
        return sum(server.cpu_s() for server in servers)

    def discard(self, wait: bool = True) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.end(wait)


class _Reapers:
    """The threads that wait for the end of children that already answered (``_Supervised``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self, end: Callable[[], None]) -> None:
        thread = threading.Thread(target=end, name="child-reap", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def wait(self, timeout: float) -> None:
        """Until the children that answered have ended and been reaped (at most ``timeout``)."""
        with self._lock:
            threads = list(self._threads)
        until = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, until - time.monotonic()))


_spares = _Spares()
_servers = _Servers()
_reapers = _Reapers()
atexit.register(_spares.discard)
# At exit the servers are not waited for: one whose child still runs ends after it, and the
# child ends at this process's end (its stdin closes).
atexit.register(_servers.discard, wait=False)


def discard_spares() -> None:
    """End the children started ahead of their work and the fork servers (at exit; tests that
    count processes or folders)."""
    _spares.discard()
    _servers.discard()


def start_ahead(
    module: str, args: Sequence[str] = (), memory_mb: int | None = -1, request_follows: bool = False
) -> None:
    """Start ``module``'s fork server (Linux; elsewhere a spare child) now, in a thread, for a
    run that is likely soon (a person chose Open…): that run then waits for neither the
    interpreter's start nor the module's imports (the first CSV import of a session: about a
    second).  Returns at once; a server or spare that is there already is kept.

    ``request_follows``: the caller (a worker, never the UI thread) makes the run next.  The start
    (a fork and an exec: milliseconds) is then made before this returns, so that no server appears
    after a :func:`discard_spares` that follows, and a new server waits for the run before it
    warms up."""
    cap = _memory_mb if memory_mb == -1 else memory_mb
    if forks.available():
        start = functools.partial(_servers.start, module, args, cap, request_follows)
    else:
        start = functools.partial(_spares.ensure, module, args, cap)
    if request_follows:
        start()
        return
    threading.Thread(target=start, name="child-ahead", daemon=True).start()


def wait_warm(module: str, timeout: float) -> bool:
    """Wait until ``module``'s fork server took every step of its warm-up (at most ``timeout``
    seconds); False where it has none (not started, ended, not Linux) or past the timeout.  For
    the benchmarks: an import that follows the first one, measured as when a person opens the
    next file after a pause, not while the server still imports the readers."""
    return _servers.wait_warm(module, timeout)


def children_cpu_s() -> float:
    """CPU seconds the app's children have used so far: the ended ones (``RUSAGE_CHILDREN``) and
    the fork servers with the children they forked (for the benchmarks: the work of an import is
    a child's CPU now, not this process's).  Waits first for the children that answered to be
    reaped (milliseconds): their CPU counts once they are."""
    _reapers.wait(timeout=10.0)
    try:
        import resource
    except ImportError:
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + _servers.cpu_s()


class _Supervised:
    def __init__(
        self,
        started: _Started,
        plan: dict[str, Any],
        what: str,
        cancel: threading.Event | None,
        on_message: Callable[[Message], None] | None,
        on_stderr: Callable[[bytes], None] | None,
        memory_mb: int | None,
    ) -> None:
        self.what = what
        self.cancel = cancel
        self.on_message = on_message
        self.memory_mb = memory_mb
        self.errors = started.errors
        self.tail: list[bytes] = []
        self.lines: queue.Queue[Message | None] = queue.Queue()
        self.proc = started.proc
        self.readers = [threading.Thread(target=self._read, name="child-messages", daemon=True)]
        if on_stderr is not None:
            self.readers.append(
                threading.Thread(
                    target=self._read_stderr, args=(on_stderr,), name="child-stderr", daemon=True
                )
            )
        for reader in self.readers:
            reader.start()
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(plan) + "\n").encode("ascii"))
            self.proc.stdin.flush()
        except OSError:
            pass  # it died at start: its exit says why, below

    def _read(self) -> None:
        assert self.proc.stdout is not None
        # A pipe a grandchild still holds open past the join's timeout is closed under the
        # reader (``_end``): that ends it too.
        with contextlib.suppress(ValueError, OSError):
            for line in self.proc.stdout:
                message = Message.decode(line)
                if message is not None:
                    self.lines.put(message)
        self.lines.put(None)

    def _read_stderr(self, on_stderr: Callable[[bytes], None]) -> None:
        assert self.proc.stderr is not None
        with contextlib.suppress(ValueError, OSError):
            for line in self.proc.stderr:
                self.tail = [*self.tail[-19:], line]
                on_stderr(line)

    def run(self, start_s: float, step_s: float | None, total_s: float | None) -> Message:
        began = time.monotonic()
        end = began + total_s if total_s is not None else None
        deadline: float | None = began + start_s
        started = False
        reap_aside = False
        try:
            while True:
                now = time.monotonic()
                if self.cancel is not None and self.cancel.is_set():
                    self._kill()
                    raise ChildStopped(f"{self.what} was stopped", "stopped")
                if end is not None and now > end + KILL_GRACE_S:
                    self._kill()
                    raise ChildTimedOut(f"{self.what} ran past its {total_s:g} s time limit", "timeout")
                if deadline is not None and now > deadline + (KILL_GRACE_S if started else 0.0):
                    self._kill()
                    if not started:
                        raise ChildTimedOut(f"{self.what} did not start within {start_s:g} s", "timeout")
                    raise ChildTimedOut(f"{self.what} ran past its {step_s:g} s time limit", "timeout")
                try:
                    message = self.lines.get(timeout=POLL_S)
                except queue.Empty:
                    continue
                if message is None:
                    raise self._died()
                if not started or message.kind in ("step", "alive", "progress"):
                    started = True
                    deadline = time.monotonic() + step_s if step_s is not None else None
                if message.kind == "done":
                    # Reaped aside unless stderr lines may still be due to the caller's callback.
                    reap_aside = len(self.readers) == 1
                    return message
                if message.kind == "error":
                    kind = str(message.data.get("error", "known"))
                    text = str(message.data.get("text", ""))
                    raise ChildFailed(text, kind)
                if message.kind != "alive" and self.on_message is not None:
                    self.on_message(message)
        finally:
            if reap_aside:
                # The child said ``done`` as the last thing before ``os._exit``: its files are
                # closed, and its end (the exit, its server's reaping, the pipes' end of file) is
                # waited for beside the caller's next step rather than before the answer.
                _reapers.start(self._end)
            else:
                self._end()

    def _kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()

    def _end(self) -> None:
        try:
            self.proc.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            self._kill()
            self.proc.wait()
        # The readers end at the pipes' end of file, which the child's exit brings: join them
        # before closing the pipes under them (a reader mid-line on a closed file raised).
        for reader in self.readers:
            reader.join(timeout=2.0)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def _stderr_tail(self) -> list[str]:
        if self.tail:
            text = b"".join(self.tail)
        else:
            self.errors.seek(0, os.SEEK_END)
            size = self.errors.tell()
            self.errors.seek(max(0, size - 8192))
            text = self.errors.read()
        return [line for line in text.decode("utf-8", "replace").splitlines() if line.strip()]

    def _died(self) -> ChildDied:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2.0)
        code = self.proc.poll()
        tail = self._stderr_tail()
        at_cap = self.memory_mb is not None and any(w in line for line in tail for w in _MEMORY_WORDS)
        cap = f"its {self.memory_mb} MB memory cap"
        if code is not None and code < 0:
            name = signal_name(-code)
            if at_cap:
                return ChildDied(f"{self.what} reached {cap} and was ended ({name})", "memory")
            return ChildDied(f"{self.what} crashed ({name})", "signal")
        if at_cap:
            return ChildDied(f"{self.what} reached {cap}", "memory")
        detail = f": {tail[-1]}" if tail else ""
        return ChildDied(f"{self.what} ended unexpectedly (exit status {code}){detail}", "exit")
