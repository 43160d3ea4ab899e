"""A fork server: one warm child that forks each child of its module, so none pays the imports.

An importer child spends about a CPU-second importing Arrow, ADBC, calamine and the readers
before it reads a byte; in the app's own process that second was paid once per session.  A spare
started ahead (``supervise._Spares``) hides it only when the person pauses between imports, and
each import still burns it.  Here one child of the module is started once (the *server*): it runs
the module's ``child_main``, which imports what the work needs, and where the work would begin
(:func:`.messages.serve`) it waits instead for requests, and forks a new child for each.  The
forked child is a fresh child in every way the parent can tell: its own session, stdin, stdout
and stderr (the parent's pipes, passed over a Unix socket), environment, private temporary
folder and working folder; the memory cap is the server's (``RLIMIT_AS``, inherited; a server
per cap); the parent kills it through a pidfd and learns its end (signal, exit status) from the
server, which is its parent and reaps it.  While idle the server forks the next child ahead (a
*spare* that waits for its request on a socket of its own), so an import does not wait for the
fork either (about 6 ms on the 2-core machine: the page tables of the readers' libraries).

Fork is only safe in a process with one thread: a lock another thread held stays locked in the
child.  The server never starts a thread (no stdin watcher: the socket's end of file ends it),
the two libraries that start one as they load are told not to (:data:`SINGLE_THREADED_ENV`),
and it checks before each fork that it still has exactly one (``/proc/self/task``); Arrow's own
pools start at first use, in the forked child.  If the check fails the request is refused and the
parent starts the child the ordinary way.  Linux only: macOS's system libraries are not
fork-safe, Windows has no fork; there the spares remain.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from sqale_desktop.core.child.launch import child_command, child_env
from sqale_desktop.core.errors import KnownError

FORKS_ENV = "SQALE_DESKTOP_CHILD_FORKS"  # the server's end of the socket, set by the parent
# Set by a parent that starts the server for a request it is about to send (not ahead of one):
# the server waits for that request before its warm-up (see serve_forks).
REQUEST_FOLLOWS_ENV = "SQALE_DESKTOP_CHILD_FORKS_REQUEST"
# Sent milliseconds after the ready; a parent stopped meanwhile sends none: warm up after this.
FIRST_REQUEST_S = 5.0
READY_S = 30.0  # the server's interpreter and the module's imports, on a busy computer
FORK_S = 10.0  # a warm server answers a request in milliseconds
_MAX_MESSAGE = 1 << 20  # a request carries the environment: kilobytes
# Libraries that start a thread as they load, told not to in the server (measured with pyarrow
# 26: its import left three threads): jemalloc's background purger (Arrow's bundled jemalloc,
# which is not even Arrow's default pool, mimalloc) and OpenBLAS's pool (numpy's, which pyarrow
# imports; no import does linear algebra).  The forked children start Arrow's pools afresh.
SINGLE_THREADED_ENV = {"JE_ARROW_MALLOC_CONF": "background_thread:false", "OPENBLAS_NUM_THREADS": "1"}


def available() -> bool:
    """Whether children can be forked from a server here (Linux, Python's fd passing)."""
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds") and hasattr(os, "fork")


class ServerGone(KnownError, OSError):
    """The server ended, refused, or did not answer: start the child the ordinary way.

    Caught by the supervisor, which then starts the child itself; a known condition (the server is
    a process that can be killed), never shown as a bug."""


class Server:
    """The parent's end of one fork server (one module, arguments and memory cap)."""

    def __init__(
        self, module: str, args: Sequence[str], memory_mb: int | None, request_follows: bool = False
    ) -> None:
        """Start the server; ``request_follows``: the caller sends a request once it is ready."""
        self.key = (module, tuple(args), memory_mb)
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**child_env(memory_mb), **SINGLE_THREADED_ENV, FORKS_ENV: str(theirs.fileno())}
        if request_follows:
            env[REQUEST_FOLLOWS_ENV] = "1"
        try:
            self.proc = subprocess.Popen(
                child_command(module, *args),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
                cwd=os.sep,  # it writes nothing, and holds no folder of the caller's busy
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except BaseException:
            self._sock.close()
            raise
        finally:
            theirs.close()
        self._cond = threading.Condition()
        self._ready = False
        self._warm = False  # it took every step of its warm-up
        self._gone = False
        self._next_id = 0
        self._forked: dict[int, Forked | None] = {}  # request id -> its child (None: refused)
        self._children: dict[int, Forked] = {}  # pid -> child, until the server reaped it
        self._reader = threading.Thread(target=self._read, name="child-forks", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        with self._cond:
            return not self._gone

    def wait_ready(self, until: float, stopped: Callable[[], bool]) -> bool:
        """Wait until the server is warm; False once ``stopped()`` or past ``until``.  Raises
        :class:`ServerGone` when it ended first."""
        with self._cond:
            while not self._ready:
                if self._gone:
                    raise ServerGone("the fork server ended")
                if stopped() or time.monotonic() > until:
                    return False
                self._cond.wait(0.02)
        return True

    def wait_warm(self, until: float) -> bool:
        """Wait until the server took every step of its warm-up; False past ``until`` or once it
        ended (for a measure of the imports that follow the first one, as when a person opens
        the next file after a pause)."""
        with self._cond:
            while not self._warm:
                if self._gone or time.monotonic() > until:
                    return False
                self._cond.wait(0.05)
        return True

    def fork(self, stdin: int, stdout: int, stderr: int, env: dict[str, str], cwd: Path) -> Forked:
        """A new child whose fds 0, 1 and 2 are ``stdin``, ``stdout`` and ``stderr`` (the caller
        closes its copies of those it does not keep)."""
        request = json.dumps({"env": env, "cwd": str(cwd)}).encode("utf-8")
        with self._cond:
            if self._gone or not self._ready:
                raise ServerGone("the fork server is not ready")
            self._next_id += 1
            ident = self._next_id
            try:
                socket.send_fds(self._sock, [json.dumps({"id": ident}).encode() + b"\n" + request],
                                [stdin, stdout, stderr])  # fmt: skip
            except OSError as exc:
                self._retire_locked()  # it died: the next fork goes to a new one
                raise ServerGone(str(exc)) from None
            until = time.monotonic() + FORK_S
            while ident not in self._forked:
                if self._gone or time.monotonic() > until:
                    break
                self._cond.wait(0.05)
            if ident not in self._forked:
                self._retire_locked()
                self.proc.kill()  # no answer in seconds: a server that is stuck
            answer = self._forked.pop(ident, None)
            if answer is None:
                raise ServerGone("the fork server refused or did not answer")
            return answer

    def end(self, wait: bool = True) -> None:
        """Retire the server: it forks no more, and ends once the children it forked ended (it
        reaps them and tells their end here).  ``wait``: until it ended (killed past a grace)."""
        with self._cond:
            self._retire_locked()
        if not wait:
            return
        self._reader.join(timeout=5.0)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def cpu_s(self) -> float:
        """CPU time of this server (its imports) and of the forked children it reaped (Linux's
        /proc: its utime, stime, cutime and cstime); 0 once it ended (its parent's
        ``RUSAGE_CHILDREN`` counts it then)."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
        return 0.0

    def _retire_locked(self) -> None:
        if not self._gone:
            self._gone = True
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_WR)  # the server's end of file; its answers still come
            self._cond.notify_all()

    def _read(self) -> None:
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(self._sock, _MAX_MESSAGE, 1)
            except OSError:
                data, fds = b"", []
            if not data:
                break
            message = json.loads(data)
            with self._cond:
                if "ready" in message:
                    self._ready = True
                elif "warm" in message:
                    self._warm = True
                elif "id" in message:
                    # Known here, before the next message (its exit, if it died at once) is read.
                    pid = int(message["pid"])
                    forked = Forked(self, pid, fds.pop() if fds else None) if pid > 0 else None
                    self._forked[int(message["id"])] = forked
                    if forked is not None:
                        self._children[pid] = forked
                elif "exit" in message:
                    child = self._children.pop(int(message["exit"]), None)
                    if child is not None:
                        child.ended(int(message["code"]))
                self._cond.notify_all()
            for fd in fds:
                os.close(fd)
        with self._cond:
            self._gone = True
            orphans, self._children = list(self._children.values()), {}
            for child in orphans:  # the server died: nobody reaps them now; end them, and say so
                child.kill()
                child.ended(-signal.SIGKILL)
            self._forked.clear()
            self._cond.notify_all()
        with contextlib.suppress(OSError):
            self._sock.close()
        try:
            self.proc.wait(timeout=5.0)  # it closed its end: it is ending
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Forked:
    """A forked child, seen through what ``supervise`` uses of a ``subprocess.Popen``: ``pid``,
    ``kill``, ``poll``, ``wait`` (its pipes are the caller's, kept by ``supervise._Started``)."""

    stdin: IO[bytes] | None = None
    stdout: IO[bytes] | None = None
    stderr: IO[bytes] | None = None

    def __init__(self, server: Server, pid: int, pidfd: int | None) -> None:
        self._cond = server._cond
        self.pid = pid
        self._pidfd = pidfd
        self.returncode: int | None = None

    def kill(self) -> None:
        """SIGKILL, through the pidfd: never another process that got the number after it ended."""
        with self._cond:
            if self.returncode is not None:
                return
            with contextlib.suppress(OSError):
                if self._pidfd is not None:
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                else:
                    os.kill(self.pid, signal.SIGKILL)  # not reaped yet: still this child's number

    def poll(self) -> int | None:
        with self._cond:
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        until = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self.returncode is None:
                left = None if until is None else until - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0.0)
                self._cond.wait(left)
            return self.returncode

    def ended(self, code: int) -> None:
        """Called by the server's reader, holding the condition."""
        self.returncode = code
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


# -- the server's side -------------------------------------------------------------------------


WarmStep = str | Callable[[], object]  # a module to import, or a call that loads a library


def warm_up(step: WarmStep) -> None:
    """One step of a warm-up: import the module it names, or make its call; a step that fails
    is left to the work, which meets (and reports) the same failure itself."""
    with contextlib.suppress(Exception):
        if callable(step):
            step()
        else:
            importlib.import_module(step)


def serve_forks(fd: int, warm: Sequence[WarmStep] = ()) -> None:
    """The server's loop, in the child the parent started with :data:`FORKS_ENV`.

    It is ready at once and takes the steps of ``warm`` (:func:`warm_up`: imports, and calls that
    load a library) one by one while it is idle (no request waiting, no child of its own
    running): the first import of a session is forked
    before they are all in, imports what it needs itself (as a new child would) and does not
    share the two cores with the rest of the warm-up; later ones find them imported.  Its last
    step, and again whenever it is idle without one, forks a *spare* (:func:`_fork_spare`): the
    next request goes to that child, which the fork's milliseconds (a copy of the page tables
    of the readers' libraries) then do not delay.

    A server started for a request (:data:`REQUEST_FOLLOWS_ENV`) waits for it before the first
    step (at most :data:`FIRST_REQUEST_S`): the request comes a few milliseconds after the ready,
    and a step begun in between (the first one imports the readers' package: 40-60 ms) delayed
    the first import of a process by as much.

    Returns only in a forked child, set up as a new child would be.  The server itself ends
    (``os._exit``) once the parent closed its end of the socket (it retired the server, or died)
    and every child it forked has ended and been reaped."""
    sock = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _n, _f: None)
    with contextlib.suppress(AttributeError, ValueError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the app's to handle
    request_follows = os.environ.pop(REQUEST_FOLLOWS_ENV, None) is not None
    _say(sock, {"ready": True})
    if request_follows:
        select.select([sock.fileno()], [], [], FIRST_REQUEST_S)
    pending = list(warm)
    warm_said = False
    spare: tuple[int, socket.socket] | None = None  # its pid, and the server's end of its socket
    spares = True  # False once one could not be forked (a thread appeared): none is tried again
    live: set[int] = set()
    closing = False
    while not (closing and not live):
        idle = not live and not closing and (bool(pending) or (spares and spare is None))
        watched = [wake_r] if closing else [sock.fileno(), wake_r]
        readable, _, _ = select.select(watched, [], [], 0 if idle else None)
        if not readable and idle:
            if pending:
                warm_up(pending.pop(0))
                continue
            if _threads() == 1:
                spare = _fork_spare(sock, (wake_r, wake_w))
                if spare is None:
                    return  # in the spare, which has its request
            else:
                spares = False
            if not warm_said:
                warm_said = True
                _say(sock, {"warm": True})
            continue
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 512):
                    pass
            _reap(sock, live)
        if closing or sock.fileno() not in readable:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, 3)
        except OSError:
            data, fds = b"", []
        if not data:
            closing = True
            if spare is not None:  # its end of file ends it; reaped before the server ends
                live.add(spare[0])
                spare[1].close()
                spare = None
            continue
        head, _, body = data.partition(b"\n")
        ident = json.loads(head)["id"]
        pid = 0
        if len(fds) == 3 and spare is not None:
            pid, theirs = spare
            spare = None
            try:
                socket.send_fds(theirs, [body], fds)
            except OSError:  # it died while it waited (killed): fork one now instead
                pid = 0
            theirs.close()
        if len(fds) == 3 and pid == 0 and _threads() == 1:  # fork is only safe with one thread
            pid = _fork()
            if pid == 0:
                _leave_server(sock, (wake_r, wake_w))
                _become_child(fds, json.loads(body))
                return
        for received in fds:
            os.close(received)
        if pid == 0:  # refused
            _say(sock, {"id": ident, "pid": 0})
            continue
        live.add(pid)
        pidfd = None
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(pid)  # not reaped before the parent has it: never another's
        _say(sock, {"id": ident, "pid": pid}, [pidfd] if pidfd is not None else [])
        if pidfd is not None:
            os.close(pidfd)
    os._exit(0)


def _fork() -> int:
    """``os.fork``, once every object the server holds is frozen (``gc.freeze``, as Python's
    documentation advises before a fork without exec): a collection in the child then never walks
    them, and so never writes to (and copies) the pages they share with the server: a 10,000-row
    workbook's import took about 3,400 fewer page faults (``perf stat -e page-faults``, 8 runs:
    38,100-39,300 against 41,400-42,100).  The server's own cycles wait in the frozen
    generation; it makes almost none while it waits."""
    sys.stderr.flush()
    gc.freeze()
    return os.fork()


def _fork_spare(sock: socket.socket, wake: tuple[int, int]) -> tuple[int, socket.socket] | None:
    """Fork a child that waits for its request (the parent's pipes and the environment) on a
    socket of its own: its pid and the server's end of that socket, in the server; None in the
    spare once it has its request and is set up as a new child (it ends, status 0, at the
    socket's end of file: the server retired it).  A spare cannot ask the server for anything:
    it holds neither the parent's socket nor, once served, its own."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = _fork()
    if pid != 0:
        theirs.close()
        return pid, ours
    ours.close()
    _leave_server(sock, wake)
    try:
        data, fds, _flags, _addr = socket.recv_fds(theirs, _MAX_MESSAGE, 3)
    except OSError:
        data, fds = b"", []
    theirs.close()
    if not data or len(fds) != 3:
        os._exit(0)
    _become_child(fds, json.loads(data))
    return None


def _say(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    with contextlib.suppress(OSError):  # the parent is gone: its children end on their own
        socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def _reap(sock: socket.socket, live: set[int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        live.discard(pid)
        _say(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _leave_server(sock: socket.socket, wake: tuple[int, int]) -> None:
    """In a forked child: the server's socket, wake-up pipe and signal handlers let go."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    sock.close()  # a child that a hostile file took over cannot ask the server for anything
    for fd in wake:
        os.close(fd)


def _become_child(fds: list[int], request: dict[str, Any]) -> None:
    """In the forked child: the parent's pipes as stdin, stdout and stderr, its own session,
    environment, temporary and working folder."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # read again from TMPDIR: the child's private folder
    os.chdir(request["cwd"])
