"""The database worker process: where every statement on a user's database runs.

One SQLite C function runs as long as its arguments ask (LIKE of a 66 MB text, ``trim`` of a
megabyte, printf's repeat loop), and neither the progress handler nor ``sqlite3_interrupt``
reaches inside it; a bug in SQLite or in a function it calls can crash the process it runs in.
So statements run here, in a child process the app can kill (``process.py`` is the app's side):
past its deadline or a Stop plus a short grace the app kills this process and starts another,
and a crash here is a message in the app, never the end of the window.  A memory cap
(``RLIMIT_AS``) turns a runaway allocation into a clear message too.

Started as ``sqale-desktop --child-module sqale_desktop.core.db.worker MEMORY_MB`` (which works in
the frozen app as well, ``core.child.launch``).  Requests arrive on stdin and replies
leave on stdout, both as ``multiprocessing.connection`` messages; the process's own stdout is
pointed at stderr so that nothing else can write into the reply stream.  One session (one
database connection, ``session.Session``) at a time; the app leases the worker to one thread of
one database and gives it back to its pool afterwards.  EOF on stdin (the app closed the pipe or
died) ends the process.

Requests are tuples ``(op, ...)``; each has exactly one reply unless said otherwise:

- ``("probe", path, immutable, wait_s)``: open the file once and read its schema (``open_readonly``)
- ``("open", path, immutable, decode)``: open a session (closing the previous one)
- ``("execute", drops, sql, params, max_rows, deadline, limit_s)``: ``(columns, rows, truncated)``
- ``("start", drops, key, sql, params, skip, deadline, limit_s)``: the columns; the cursor stays
  open, past its first ``skip`` rows (a cursor resumed in another worker)
- ``("fetch", drops, key, count, budget, deadline, limit_s)``: ``(rows, value_bytes)``
- ``("drop", key)``: close cursor ``key``; no reply
- ``("close",)``: close the session (the worker goes back to the pool)

A statement the backstop had to interrupt (``watchdog.py``) gets a fresh connection behind it;
cursors left open on the old one answer that they were stopped.  ``drops`` lists cursors the app
closed since the last request (closing one never waits for the worker).  A reply is
``("ok", value)``, ``("error", class_name, message, retire)`` for a condition of the world
(``retire``: the worker must be replaced, after it ran out of memory), or ``("bug", traceback)``.
Stop is ``SIGUSR1``: the handler sets a flag that the progress handler reads; the app sends it
again and again until the reply comes, so a Stop that lands between two requests (the flag is
cleared as each begins) is not lost.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sqlite3
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from sqale_desktop.core.child.launch import apply_memory_cap
from sqale_desktop.core.db.errors import (
    DatabaseError,
    DatabaseUnreadable,
    QueryInterrupted,
    QueryOutOfMemory,
    QueryTimeout,
)
from sqale_desktop.core.db.session import Session, out_of_memory_message, probe, time_limit_message
from sqale_desktop.core.db.watchdog import Backstop

MODULE = "sqale_desktop.core.db.worker"
STOP_SIGNAL = getattr(signal, "SIGUSR1", signal.SIGTERM)
_APP_CHECK_S = 0.2
"""How often a worker checks that the app is still there (its parent process)."""
# The requests that run a statement under a deadline (the backstop is armed for them).
STATEMENT_OPS = frozenset(("execute", "start", "fetch"))


class Worker:
    """The worker's state: its session, the Stop flag, the backstop; ``handle`` answers a request."""

    def __init__(self, memory_mb: int) -> None:
        self.memory_mb = memory_mb
        self.session: Session | None = None
        self.stop_flag = False
        self.backstop = Backstop()

    def on_stop(self, _signum: int, _frame: object) -> None:
        self.stop_flag = True

    def stopped(self) -> bool:
        return self.stop_flag

    def handle(self, request: tuple[Any, ...]) -> tuple[Any, ...] | None:
        try:
            reply = self._answer(request)
        finally:
            self.backstop.disarm()  # from here on it cannot fire: ``fired`` is final
        if self.backstop.fired and request[0] in STATEMENT_OPS:
            return self._past_deadline(reply, request[-1])
        return reply

    def _past_deadline(self, reply: tuple[Any, ...] | None, limit_s: float) -> tuple[Any, ...] | None:
        """The backstop interrupted the connection during this step: the step ran past its
        deadline, whatever it answered.

        A step can end the normal way in the moment the backstop fires (one long C call that
        returned its row just then).  The interrupt stays in force on the connection while any
        statement is open (a paged cursor between pages), so the next step there, within its own
        deadline and with no Stop, ended "cancelled" (43 of 100 paged fetches under load).  So
        the connection is replaced, and the step is a time-out (a Stop's, when Stop came), unless
        it already said so or ran out of memory."""
        self._reconnect()
        if reply is None or reply[0] == "bug":
            return reply
        if reply[0] == "error" and (reply[1] == QueryTimeout.__name__ or reply[3] or self.stop_flag):
            return reply
        if self.stop_flag:
            return ("error", QueryInterrupted.__name__, "the query was cancelled", False)
        return ("error", QueryTimeout.__name__, time_limit_message(limit_s), False)

    def _answer(self, request: tuple[Any, ...]) -> tuple[Any, ...] | None:
        op = request[0]
        try:
            if op == "open":
                self._close()
                _, path, immutable, decode = request
                self.session = Session(
                    Path(path),
                    immutable=immutable,
                    decode=decode,
                    stopped=self.stopped,
                    memory_mb=self.memory_mb,
                )
                return ("ok", None)
            if op == "probe":
                self._close()
                _, path, immutable, wait_s = request
                probe(Path(path), immutable=immutable, wait_s=wait_s)
                return ("ok", None)
            if op == "drop":
                if self.session is not None:
                    self.session.drop(request[1])
                return None
            if op == "close":
                self._close()
                return ("ok", None)
            return ("ok", self._statement(op, request))
        except DatabaseError as exc:
            return ("error", type(exc).__name__, str(exc), False)
        except sqlite3.Error as exc:  # connect_readonly: the file cannot be opened at all
            return ("error", DatabaseUnreadable.__name__, f"cannot open {request[1]}: {exc}", False)
        except MemoryError:
            return ("error", QueryOutOfMemory.__name__, out_of_memory_message(self.memory_mb), True)
        except Exception:
            return ("bug", traceback.format_exc())

    def _statement(self, op: str, request: tuple[Any, ...]) -> object:
        session = self.session
        if session is None:
            raise RuntimeError("no database is open in this worker")
        for key in request[1]:
            session.drop(key)
        deadline, limit_s = request[-2], request[-1]
        self.stop_flag = False
        session.arm(deadline, limit_s)
        self.backstop.arm(session.conn, deadline)
        if op == "execute":
            _, _, sql, params, max_rows, _, _ = request
            return session.execute(sql, params, max_rows)
        if op == "start":
            _, _, key, sql, params, skip, _, _ = request
            return session.start(key, sql, params, skip)
        if op == "fetch":
            _, _, key, count, budget, _, _ = request
            return session.fetch(key, count, budget)
        raise RuntimeError(f"unknown request {op!r}")

    def _reconnect(self) -> None:
        """A fresh connection after the backstop's ``sqlite3_interrupt``: the interrupt stays in
        force while any statement of the old one is open, so none may inherit it."""
        session = self.session
        if session is not None:
            self.session = session.reopened()
            session.close()

    def _close(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            session.close()


def child_main(argv: list[str]) -> int:
    """The worker's entry point: ``argv`` is ``[MEMORY_MB]`` (0: no cap)."""
    memory_mb = int(argv[0]) if argv else 0
    requests = Connection(os.dup(0), writable=False)
    replies = Connection(os.dup(1), readable=False)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # print() and C libraries writing to stdout must not corrupt the replies
    sys.stdout = sys.stderr
    apply_memory_cap(memory_mb)
    _end_with_the_app()
    worker = Worker(memory_mb)
    signal.signal(STOP_SIGNAL, worker.on_stop)
    if hasattr(signal, "siginterrupt"):
        signal.siginterrupt(STOP_SIGNAL, False)  # restart system calls (SQLite's file reads)
    with contextlib.suppress(AttributeError, ValueError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the app's to handle
    while True:
        try:
            request = requests.recv()
        except (EOFError, OSError):
            return 0
        reply = worker.handle(request)
        if reply is not None:
            try:
                replies.send_bytes(pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))
            except MemoryError:
                replies.send_bytes(
                    pickle.dumps(("error", QueryOutOfMemory.__name__, out_of_memory_message(memory_mb), True))
                )
            except OSError:
                return 0


def _end_with_the_app() -> None:
    """End when the app dies, even in the middle of a long SQLite call (which would not notice its
    closed stdin for minutes): a thread watches for the app's end and exits the process.

    Not Linux's ``PR_SET_PDEATHSIG``: its "parent" is the *thread* that started the process, so a
    worker started from a short-lived thread (the pool's spare starter, a QThreadPool thread that
    expires) was killed with SIGKILL when that thread ended, while the app still used it.  SQLite
    releases the GIL while it steps, so this thread runs during any query.
    """
    app = os.getppid()
    if app == 1:  # the app died before we got here: nothing to serve
        os._exit(0)

    def watch() -> None:
        while True:
            time.sleep(_APP_CHECK_S)
            if os.getppid() != app:
                os._exit(0)

    threading.Thread(target=watch, name="app-watch", daemon=True).start()
