"""``ReadOnlyDatabase``: one SQLite file opened read-only, usable from several threads.

A sqlite3 connection stays on the thread that opened it, so the database keeps one connection per
thread (the model worker runs tools, the UI's pool runs user SQL and schema loading), each with
the same guards: ``mode=ro``, ``query_only``, the authorizer allow-list, no ATTACH slots, and a
progress handler that enforces the time limit and notices ``interrupt()``.  Cancelling through the
progress handler (rather than ``sqlite3_interrupt``) stops only the statement that was running,
so a paged cursor left open elsewhere cannot poison the next query.  A statement the progress
handler cannot reach in time (few, expensive VM instructions) is stopped by the watchdog's
``sqlite3_interrupt`` instead, after which its connection is retired (``watchdog.py``).
"""

from __future__ import annotations

import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqale_desktop.core.db import shm
from sqale_desktop.core.db.cursor import QueryCursor
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
    StatementTooLong,
)
from sqale_desktop.core.db.guard import (
    WRITE_KEYWORDS,
    ReadOnlyGuard,
    denial_message,
    leading_keyword,
    refuse_by_keyword,
)
from sqale_desktop.core.db.link import MAX_RESULT_BYTES, Link, fetch_within, prepare_text
from sqale_desktop.core.db.opening import STALE_NOTE, FileFacts, inspect_file, sqlite_uri
from sqale_desktop.core.db.printf_guard import install as install_printf_guard
from sqale_desktop.core.db.watchdog import GRACE_S, Watchdog

DEFAULT_TIME_LIMIT_S = 10.0
# VM instructions between progress-handler calls: small enough that a runaway query stops within
# a few milliseconds of its deadline, large enough that the Python callback costs little.
PROGRESS_STEPS = 2000
DEFAULT_CURSOR_CAP = 100_000
# The largest single value (string or blob) a statement may make or read.  A value this size is
# already far beyond what a person or the model reads (the grid shows a blob's size, the model a
# cut-down cell); the bound keeps zeroblob()/randomblob() rows cheap enough that the time limit,
# checked between rows, still holds.
MAX_VALUE_BYTES = 64 * 1024 * 1024
# The longest statement accepted, in characters.  Longer text is refused before anything parses
# it: the keyword pre-check and SQLite's parser would otherwise spend seconds (or gigabytes) on it
# outside the time limit, and nobody types or generates a megabyte of SQL to ask a question.
MAX_SQL_CHARS = 1_000_000
# LIKE and GLOB compare in one C call, in time proportional to text length times pattern length
# (a 1 MB text against a 10 KB pattern: 40 s that no limit can interrupt).  Real patterns are
# a few dozen characters; SQLite's default allows 50,000.
MAX_LIKE_PATTERN_CHARS = 1000
CLOSE_WAIT_S = 2.0
# How often a statement that finds the file locked by another program tries again.  SQLite's own
# busy handler would wait inside one C call, deaf to Stop; retrying here keeps Stop and the time
# limit in charge, so the connection's busy timeout is 0.
LOCK_RETRY_S = 0.05


@dataclass
class QueryResult:
    """The first rows of a statement; ``truncated`` is True when more rows existed than were kept."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    row_count: int
    truncated: bool
    seconds: float


def _decode_text(raw: bytes) -> str:
    # Real files hold invalid UTF-8 now and then; one bad cell must not fail the whole query.
    return raw.decode("utf-8", errors="replace")


class ReadOnlyDatabase:
    """A SQLite file opened read-only; see the module docstring for the threading model.

    Attributes: ``path``; ``immutable`` (opened with ``immutable=1`` because a WAL database sits
    in a read-only folder); ``notes`` (things the user should know, e.g. the stale snapshot);
    ``time_limit_s`` (per statement, settable).  ``shm_existed``/``wal_existed``: whether those
    files were there before anything of ours opened the file (``open_readonly`` looks before
    probing; by default they are looked at now).
    """

    def __init__(
        self,
        path: Path,
        *,
        immutable: bool,
        time_limit_s: float,
        notes: list[str],
        shm_existed: bool | None = None,
        wal_existed: bool | None = None,
    ) -> None:
        self.path = path
        self.immutable = immutable
        self.notes = notes
        self._time_limit_s = DEFAULT_TIME_LIMIT_S
        self.time_limit_s = time_limit_s
        self._lock = threading.Lock()
        self._links: dict[int, Link] = {}
        self._generation = 0
        self._closed = False
        self._stop_requested_at = 0.0
        self._retired: list[Link] = []  # connections the watchdog interrupted, closed when idle
        self._watchdog = Watchdog(self._backstop)
        # (PRAGMA schema_version, Schema) of the last reading, kept by introspect.cached_schema
        self.schema_cache: tuple[int, Any] | None = None
        # A WAL database read in place gets a -shm next to it; see shm.py for when it is removed.
        self._counted = not immutable
        if self._counted:
            had_shm = shm.shm_path(path).exists() if shm_existed is None else shm_existed
            had_wal = shm.wal_path(path).exists() if wal_existed is None else wal_existed
            shm.opened(path, created_shm=not had_shm, created_wal=not had_wal)

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

    # -- queries -----------------------------------------------------------------------------

    def execute(self, sql: str, max_rows: int = 1000, params: Sequence[object] = ()) -> QueryResult:
        """Run one read-only statement and keep its first ``max_rows`` rows.

        ``params`` are bound to ``?`` placeholders (used for names passed to pragma functions).
        """
        if max_rows < 0:
            raise ValueError("max_rows must not be negative")
        link = self.link()
        started = time.perf_counter()
        with self.operation(link, sql):
            cursor = self.start(link, sql, params)
            try:
                columns = [d[0] for d in cursor.description or ()]
                fetched = fetch_within(cursor, max_rows + 1, MAX_RESULT_BYTES)[0] if columns else []
            finally:
                cursor.close()
        truncated = len(fetched) > max_rows
        rows = fetched[:max_rows]
        return QueryResult(columns, rows, len(rows), truncated, time.perf_counter() - started)

    def cursor(self, sql: str, *, max_rows: int = DEFAULT_CURSOR_CAP) -> QueryCursor:
        """Start a statement whose rows are handed out page by page (see ``QueryCursor``)."""
        return QueryCursor(self, sql, max_rows=max_rows)

    @property
    def busy(self) -> bool:
        """Whether a statement (or a cursor's page fetch) is running on any thread right now."""
        with self._lock:
            return any(link.busy for link in self._links.values())

    def interrupt(self) -> None:
        """Stop whatever statement is running on this database, from any thread.

        Each running statement notices within ``PROGRESS_STEPS`` VM instructions and ends with
        ``QueryInterrupted``; statements started afterwards run normally.
        """
        with self._lock:
            self._generation += 1
            self._stop_requested_at = time.monotonic()

    def close(self) -> None:
        """Stop running statements, close every thread's connection; later calls raise.

        A statement still running on another thread is interrupted first and given a moment to
        notice, so that its thread gets ``QueryInterrupted`` rather than a closed connection.
        """
        with self._lock:
            already = self._closed
            self._closed = True
            self._generation += 1
            self._stop_requested_at = time.monotonic()
            links = list(self._links.values()) + self._retired
            self._links.clear()
            self._retired.clear()
        deadline = time.monotonic() + CLOSE_WAIT_S
        while any(link.busy for link in links) and time.monotonic() < deadline:
            time.sleep(0.002)
        self._watchdog.stop()
        for link in links:
            link.close()
        if self._counted and not already:
            shm.closed(self.path)

    def __enter__(self) -> ReadOnlyDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the cursor and introspection use (link.LinkOwner) -------------------------------

    def link(self) -> Link:
        """This thread's connection, opened on first use."""
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

    def _connect(self) -> Link:
        conn = connect_readonly(self.path, immutable=self.immutable)
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
            if self._generation != link.started_generation:
                return 1
            if time.monotonic() > link.deadline:
                link.timed_out = True
                return 1
            return 0

        return check

    @contextmanager
    def operation(self, link: Link, sql: str, *, new_statement: bool = True) -> Iterator[None]:
        """Arm the time limit and the guard for one step of work, and translate SQLite errors.

        ``new_statement``: the work prepares ``sql`` (checked against the write keywords first);
        False for fetching more rows of a statement that already passed.
        """
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
            with link.state:
                link.busy = False
            if link.hard_interrupted:
                self._retire(link)

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

    def start(self, link: Link, sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
        """Prepare ``sql`` and step it once, trying again while another program holds the file locked.

        Call inside ``operation()``.  Waiting ends at the statement's deadline or at Stop, as any
        statement does; only the first step can find the file locked (a read keeps its lock).
        """
        while True:
            try:
                return link.conn.execute(prepare_text(sql), tuple(params))
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                if self._generation != link.started_generation:
                    raise QueryInterrupted("the query was cancelled") from None
                if time.monotonic() + LOCK_RETRY_S > link.deadline:
                    raise DatabaseLocked(locked_message(self.name, self._time_limit_s)) from None
                time.sleep(LOCK_RETRY_S)

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
        if _is_busy(exc):
            return DatabaseLocked(locked_message(self.name, self._time_limit_s))
        if code.startswith(("SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_LOCKED")):
            return DatabaseUnreadable(f"cannot read {self.name}: {message}")
        return QueryFailed(message)


def hot_journal_message(name: str) -> str:
    """The message for a file with a hot rollback journal: an unfinished transaction of another program.

    Reading it needs that transaction rolled back, which is a write; an ``immutable`` read would
    show the half-written pages as if committed, so the file is refused rather than misread.
    """
    return (
        f"cannot open {name}: it has an unfinished transaction from another program (a hot "
        f"journal, {Path(name).name}-journal), so it cannot be read safely read-only; open it once "
        "in a program that may write to it (or let the other program finish) to roll it back"
    )


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorname", "") or ""
    return code.startswith("SQLITE_BUSY") or str(exc) == "database is locked"


def locked_message(name: str, waited_s: float) -> str:
    """The message for a file another program holds locked (writing, or exclusive locking mode)."""
    return (
        f"{name} is locked by another program that is writing to it or holds it exclusively "
        f"(waited {waited_s:g} s); try again when that program has finished or closed it"
    )


def connect_readonly(path: Path, *, immutable: bool) -> sqlite3.Connection:
    """A raw sqlite3 connection with every read-only setting applied but no authorizer yet."""
    conn = sqlite3.connect(
        sqlite_uri(path, immutable=immutable),
        uri=True,
        isolation_level=None,
        timeout=0,  # a locked file is retried in ReadOnlyDatabase.start, where Stop is heard
        check_same_thread=False,  # only so that close() and cursors may be used from another thread
    )
    conn.text_factory = _decode_text
    conn.execute("PRAGMA query_only = 1")
    conn.execute("PRAGMA trusted_schema = 0")
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    # zeroblob(1e9) and friends allocate in one step, where the progress handler cannot stop them.
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 4 * MAX_SQL_CHARS)  # UTF-8 bytes
    conn.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, MAX_LIKE_PATTERN_CHARS)
    return conn


def open_readonly(path: str | Path, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> ReadOnlyDatabase:
    """Open a SQLite file read-only, or raise a ``DatabaseError`` that says what is wrong."""
    path = Path(path).expanduser()
    facts = inspect_file(path)
    wal_existed = shm.wal_path(path).exists()
    notes: list[str] = []
    immutable = facts.is_wal and not facts.shm_exists and not facts.folder_writable
    try:
        immutable = _probe_all(path, facts, immutable, time_limit_s, notes)
    except DatabaseError:
        shm.forget_failed_open(path, shm_existed=facts.shm_exists, wal_existed=wal_existed)
        raise
    return ReadOnlyDatabase(
        path,
        immutable=immutable,
        time_limit_s=time_limit_s,
        notes=notes,
        shm_existed=facts.shm_exists,
        wal_existed=wal_existed,
    )


def _probe_all(path: Path, facts: FileFacts, immutable: bool, time_limit_s: float, notes: list[str]) -> bool:
    """Probe the file the way it will be opened; returns whether it must be opened immutable."""
    if not immutable:
        try:
            _probe(path, immutable=False, wait_s=time_limit_s)
        except DatabaseLocked:
            # Also a WAL database another program holds in locking_mode=EXCLUSIVE: its pages may
            # be half checkpointed into the file, so an immutable read is not safe either.
            raise
        except DatabaseUnreadable:
            if not facts.is_wal:
                raise
            immutable = True  # the -shm file could not be created after all (a read-only mount)
    if immutable:
        _probe(path, immutable=True, wait_s=time_limit_s)
        notes.append(STALE_NOTE)
    return immutable


def _probe(path: Path, *, immutable: bool, wait_s: float) -> None:
    """Open once and read the schema, so that a bad file fails here with a clear message.

    A file locked by another program is tried again for up to ``wait_s`` (the time limit).
    """
    name = str(path)
    try:
        conn = connect_readonly(path, immutable=immutable)
    except sqlite3.Error as exc:
        raise DatabaseUnreadable(f"cannot open {name}: {exc}") from None
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                if time.monotonic() + LOCK_RETRY_S > deadline:
                    raise DatabaseLocked(locked_message(name, wait_s)) from None
                time.sleep(LOCK_RETRY_S)
    except sqlite3.Error as exc:
        code = getattr(exc, "sqlite_errorname", "") or ""
        if code == "SQLITE_READONLY_ROLLBACK":
            raise DatabaseUnreadable(hot_journal_message(name)) from None
        if code == "SQLITE_NOTADB":
            raise NotADatabase(f"{name} is not a SQLite database ({exc})") from None
        if code.startswith("SQLITE_CORRUPT"):
            raise CorruptDatabase(f"{name} is corrupt: {exc}") from None
        raise DatabaseUnreadable(f"cannot open {name}: {exc}") from None
    finally:
        conn.close()
