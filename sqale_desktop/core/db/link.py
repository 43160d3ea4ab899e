"""The connection mechanics the database and its paged cursor share: one link per thread, each step
of work run under the guards, statements prepared and rows fetched under a budget.

A sqlite3 connection stays on the thread that opened it, so a database keeps one connection per
thread (the model worker runs tools, the UI's pool runs user SQL and schema loading): a
:class:`Link`, held in the database's :class:`Links`.  Each link has the same guards: ``mode=ro``,
``query_only``, the authorizer allow-list, no ATTACH slots (``opening.connect_readonly``), the
bounded printf, and a progress handler that enforces the time limit and notices
:meth:`Links.interrupt`.  Cancelling through the progress handler (rather than
``sqlite3_interrupt``) stops only the statement that was running, so a paged cursor left open
elsewhere cannot poison the next query.  A statement the progress handler cannot reach in time
(few, expensive VM instructions) is stopped by the watchdog's ``sqlite3_interrupt`` instead, after
which its connection is retired (``watchdog.py``).

``connection.ReadOnlyDatabase`` owns one :class:`Links` and is the public face (``execute``,
``cursor``, ``interrupt``, ``close``); ``cursor.QueryCursor`` holds one link of it for as long as it
has pages to hand out.  Both import this module and neither imports the other's internals.
"""

from __future__ import annotations

import re
import sqlite3
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqale_desktop.core.db.errors import (
    CorruptDatabase,
    DatabaseError,
    DatabaseLocked,
    DatabaseUnreadable,
    NotADatabase,
    QueryDenied,
    QueryFailed,
    QueryInterrupted,
    QueryTimeout,
    ResultTooLarge,
    StatementTooLong,
)
from sqale_desktop.core.db.guard import (
    WRITE_KEYWORDS,
    ReadOnlyGuard,
    denial_message,
    leading_keyword,
    refuse_by_keyword,
)
from sqale_desktop.core.db.opening import (
    LOCK_RETRY_S,
    MAX_SQL_CHARS,
    MAX_VALUE_BYTES,
    connect_readonly,
    decode_text,
    hot_journal_message,
    is_busy,
    locked_message,
)
from sqale_desktop.core.db.printf_guard import PrintfGuard
from sqale_desktop.core.db.printf_guard import install as install_printf_guard
from sqale_desktop.core.db.watchdog import GRACE_S, Watchdog

# Bytes of values one result (execute, or all pages of a cursor) may hold in memory: rows, not
# just values, can otherwise fill memory (1,000 rows of zeroblob(6e7)).
MAX_RESULT_BYTES = 256 * 1024 * 1024
# VM instructions between progress-handler calls: small enough that a runaway query stops within
# a few milliseconds of its deadline, large enough that the Python callback costs little.
PROGRESS_STEPS = 2000
_TRAILING_SEMICOLONS = re.compile(r";[\s;]*\Z")


@dataclass
class Link:
    """One thread's connection and the state of the operation running on it."""

    conn: sqlite3.Connection
    guard: ReadOnlyGuard
    thread: weakref.ref[threading.Thread]
    deadline: float = 0.0
    started_generation: int = 0
    # The caller's own Stop flag for the operation running now (None: only ``interrupt()`` stops it).
    cancel: threading.Event | None = None
    timed_out: bool = False
    busy: bool = field(default=False)
    # Set by the watchdog when it had to sqlite3_interrupt this connection (see watchdog.py).
    hard_interrupted: bool = False
    state: threading.Lock = field(default_factory=threading.Lock)
    # Paged cursors still open on this connection: it outlives its thread until they close
    # (the grid fetches pages on the GUI thread from a cursor a pool thread started).  Changed
    # only through Links.cursor_opened/cursor_closed, under the owner's lock.
    open_cursors: int = 0
    # The bounded printf of this connection (None where it could not be installed); it must live
    # as long as the connection, which calls into it.
    printf: PrintfGuard | None = None

    def close(self) -> None:
        self.conn.close()
        if self.printf is not None:
            self.printf.close()


class Links:
    """The links of one database file, one per thread, and the running of work on them.

    ``time_limit_s`` is per statement (and per page fetch), settable.  ``decode`` turns SQLite text
    into ``str`` (default: invalid UTF-8 replaced).  Every method may be called from any thread.
    """

    def __init__(
        self,
        path: Path,
        *,
        immutable: bool,
        time_limit_s: float,
        decode: Callable[[bytes], str] = decode_text,
    ) -> None:
        self.path = path
        self.immutable = immutable
        self._decode = decode
        self._time_limit_s = 0.0
        self.time_limit_s = time_limit_s
        self._lock = threading.Lock()
        self._links: dict[int, Link] = {}
        self._generation = 0
        self._closed = False
        self._stop_requested_at = 0.0
        self._retired: list[Link] = []  # connections the watchdog interrupted, closed when idle
        self._watchdog = Watchdog(self._backstop)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def time_limit_s(self) -> float:
        return self._time_limit_s

    @time_limit_s.setter
    def time_limit_s(self, value: float) -> None:
        if not value > 0:
            raise ValueError("time_limit_s must be positive")
        self._time_limit_s = float(value)

    def current(self) -> list[Link]:
        """The links in use now: one for each thread that has used the database and may again."""
        with self._lock:
            return list(self._links.values())

    @property
    def busy(self) -> bool:
        """Whether a statement (or a cursor's page fetch) is running on any thread right now."""
        return any(link.busy for link in self.current())

    def link(self) -> Link:
        """This thread's link, opened on first use (idle links of ended threads are closed then)."""
        key = threading.get_ident()
        with self._lock:
            if self._closed:
                raise DatabaseUnreadable(f"{self.name} has been closed")
            link = self._links.get(key)
            if link is not None and link.thread() is threading.current_thread():
                return link
            dead = [
                k
                for k, v in self._links.items()
                if ((t := v.thread()) is None or not t.is_alive()) and v.open_cursors == 0
            ]
            stale = [self._links.pop(k) for k in dead]
        for old in stale:
            old.close()
        link = self._connect()
        with self._lock:
            self._links[key] = link
        return link

    def cursor_opened(self, link: Link) -> None:
        """A paged cursor now holds ``link``: keep it past its thread's end until the cursor closes."""
        with self._lock:
            link.open_cursors += 1

    def cursor_closed(self, link: Link) -> None:
        with self._lock:
            link.open_cursors -= 1

    def interrupt(self) -> None:
        """Stop whatever statement is running on any link, from any thread.

        Each running statement notices within ``PROGRESS_STEPS`` VM instructions and ends with
        ``QueryInterrupted``; statements started afterwards run normally.
        """
        with self._lock:
            self._generation += 1
            self._stop_requested_at = time.monotonic()

    def close(self, wait_s: float) -> bool:
        """Stop running statements and close every link; later ``link()`` calls raise.

        A statement still running on another thread is interrupted first and given up to
        ``wait_s`` to notice, so that its thread gets ``QueryInterrupted`` rather than a closed
        connection.  Returns False when the links were already closed.
        """
        with self._lock:
            already = self._closed
            self._closed = True
            self._generation += 1
            self._stop_requested_at = time.monotonic()
            links = list(self._links.values()) + self._retired
            self._links.clear()
            self._retired.clear()
        deadline = time.monotonic() + wait_s
        while any(link.busy for link in links) and time.monotonic() < deadline:
            time.sleep(0.002)
        self._watchdog.stop()
        for link in links:
            link.close()
        return not already

    @contextmanager
    def operation(
        self, link: Link, sql: str, *, new_statement: bool = True, cancel: threading.Event | None = None
    ) -> Iterator[None]:
        """Arm the time limit and the guard for one step of work, and translate SQLite errors.

        ``new_statement``: the work prepares ``sql`` (checked against the write keywords first);
        False for fetching more rows of a statement that already passed.  ``cancel``: the caller's
        Stop flag, seen by the progress check like ``interrupt()``.  ``interrupt()`` only stops
        work already running, so a Stop that lands while a job is still getting its connection
        (milliseconds for a new thread's link) would be lost; a flag set at any time is not.
        """
        if cancel is not None and cancel.is_set():
            raise QueryInterrupted("the query was cancelled")
        if new_statement:
            if len(sql) > MAX_SQL_CHARS:
                raise StatementTooLong(
                    f"the statement is {len(sql):,} characters long, more than the "
                    f"{MAX_SQL_CHARS:,} allowed; it was not run"
                )
            refusal = refuse_by_keyword(sql)
            if refusal is not None:
                raise QueryDenied(refusal)
        link.deadline = time.monotonic() + self._time_limit_s
        link.started_generation = self._generation
        link.cancel = cancel
        link.timed_out = False
        link.guard.reset()
        with link.state:
            link.busy = True
        self._watchdog.work_started()
        try:
            yield
        except sqlite3.Error as exc:
            raise self._translate(exc, link, sql) from exc
        except (ValueError, OverflowError, UnicodeError) as exc:
            raise QueryFailed(f"cannot run this statement: {exc}") from exc
        finally:
            link.cancel = None
            with link.state:
                link.busy = False
            if link.hard_interrupted:
                self._retire(link)

    def start(self, link: Link, sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
        """Prepare ``sql`` and step it once, trying again while another program holds the file locked.

        Call inside ``operation()``.  Waiting ends at the statement's deadline or at Stop, as any
        statement does; only the first step can find the file locked (a read keeps its lock).
        """
        while True:
            try:
                return link.conn.execute(prepare_text(sql), tuple(params))
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                if self._generation != link.started_generation or _set(link.cancel):
                    raise QueryInterrupted("the query was cancelled") from None
                if time.monotonic() + LOCK_RETRY_S > link.deadline:
                    raise DatabaseLocked(locked_message(self.name, self._time_limit_s)) from None
                time.sleep(LOCK_RETRY_S)

    def _connect(self) -> Link:
        conn = connect_readonly(self.path, immutable=self.immutable, decode=self._decode)
        guard = ReadOnlyGuard()
        link = Link(conn=conn, guard=guard, thread=weakref.ref(threading.current_thread()))
        conn.set_authorizer(guard)
        check = self._progress_check(link)
        conn.set_progress_handler(check, PROGRESS_STEPS)
        link.printf = install_printf_guard(
            conn, str(self.path.resolve()), lambda: bool(check()), MAX_VALUE_BYTES
        )
        return link

    def _progress_check(self, link: Link) -> Callable[[], int]:
        def check() -> int:
            if self._generation != link.started_generation or _set(link.cancel):
                return 1
            if time.monotonic() > link.deadline:
                link.timed_out = True
                return 1
            return 0

        return check

    def _backstop(self) -> bool:
        """The watchdog's scan: interrupt what runs on past its deadline or a Stop; True if busy."""
        now = time.monotonic()
        with self._lock:
            links = list(self._links.values())
            generation, stop_at = self._generation, self._stop_requested_at
        running = False
        for link in links:
            with link.state:
                if not link.busy:
                    continue
                running = True
                late = now > link.deadline + GRACE_S
                stopped = link.started_generation != generation and now > stop_at + GRACE_S
                if (late or stopped) and not link.hard_interrupted:
                    link.hard_interrupted = True
                    link.timed_out = link.timed_out or (late and not stopped)
                    link.conn.interrupt()
        return running

    def _retire(self, link: Link) -> None:
        """Take an interrupted connection out of use: its thread gets a fresh one next time.

        Its paged cursors (interrupted too) may still be closed by their owners; the connection
        itself is closed now if none is open, else when the database closes.
        """
        with self._lock:
            for key, value in list(self._links.items()):
                if value is link:
                    del self._links[key]
            if link.open_cursors > 0:
                self._retired.append(link)
                return
        link.close()

    def _translate(self, exc: sqlite3.Error, link: Link, sql: str) -> DatabaseError:
        message = str(exc)
        code = getattr(exc, "sqlite_errorname", "") or ""
        if isinstance(exc, sqlite3.ProgrammingError) and "one statement at a time" in message:
            return QueryDenied("read-only: only one statement at a time is allowed")
        if link.guard.last_denial is not None:
            return QueryDenied(denial_message(sql, link.guard.last_denial))
        if message.startswith("table ") and message.endswith(" may not be modified"):
            # The schema tables: the authorizer lets pragma functions through (see guard.py).
            table = message.removeprefix("table ").removesuffix(" may not be modified")
            return QueryDenied(f"read-only: changing {table} is not allowed")
        if code == "SQLITE_INTERRUPT" or message == "interrupted":
            if link.timed_out:
                return QueryTimeout(
                    f"the query ran past the {self._time_limit_s:g} s time limit and was stopped"
                )
            return QueryInterrupted("the query was cancelled")
        if code.startswith("SQLITE_CORRUPT"):
            return CorruptDatabase(f"{self.name} is corrupt: {message}")
        if code == "SQLITE_NOTADB":
            return NotADatabase(f"{self.name} is not a SQLite database ({message})")
        if code == "SQLITE_READONLY_ROLLBACK":
            return DatabaseUnreadable(hot_journal_message(str(self.path)))
        keyword = leading_keyword(sql)
        if keyword in WRITE_KEYWORDS or code.startswith("SQLITE_READONLY"):
            return QueryDenied(f"read-only: {keyword or 'writing'} is not allowed")
        if is_busy(exc):
            return DatabaseLocked(locked_message(self.name, self._time_limit_s))
        if code.startswith(("SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_LOCKED")):
            return DatabaseUnreadable(f"cannot read {self.name}: {message}")
        return QueryFailed(message)


def value_bytes(row: tuple[Any, ...]) -> int:
    """The memory a row's values take as Python objects (``sys.getsizeof``, summed in C: cheap)."""
    return sum(map(sys.getsizeof, row))


def fetch_within(cursor: sqlite3.Cursor, count: int, budget: int) -> tuple[list[tuple[Any, ...]], int]:
    """Up to ``count`` rows of ``cursor`` and their ``value_bytes``; raise past ``budget`` bytes.

    Rows are fetched one by one so that the check runs before the next row is made, and the
    ``ResultTooLarge`` leaves nothing big behind.
    """
    rows: list[tuple[Any, ...]] = []
    used = 0
    for _ in range(count):
        row = cursor.fetchone()
        if row is None:
            break
        used += value_bytes(row)
        if used > budget:
            rows.clear()
            raise ResultTooLarge(
                f"the result holds more than {MAX_RESULT_BYTES // (1024 * 1024)} MB of values and was "
                "stopped; select fewer rows or columns, or length()/substr() of large values"
            )
        rows.append(row)
    return rows, used


def prepare_text(sql: str) -> str:
    """``sql`` without a run of trailing semicolons, which SQLite would count as more statements."""
    return _TRAILING_SEMICOLONS.sub("", sql)


__all__ = [
    "MAX_RESULT_BYTES",
    "PROGRESS_STEPS",
    "Link",
    "Links",
    "fetch_within",
    "prepare_text",
    "value_bytes",
]


def _set(flag: threading.Event | None) -> bool:
    return flag is not None and flag.is_set()
