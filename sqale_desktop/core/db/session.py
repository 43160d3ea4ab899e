"""One database connection inside the database worker, with every guard, and its statements.

This module runs in the worker process (``worker.py``), never in the app: a :class:`Session` is
the worker's connection to one database file, opened with every guard the app has ever had
(``mode=ro``, ``query_only``, ``trusted_schema = 0``, no ATTACH slots, the authorizer
allow-list, no extensions: ``opening.connect_readonly`` and ``guard.ReadOnlyGuard``) and a
progress handler that enforces the statement's deadline and the worker's Stop flag.  It runs a
statement and keeps its first rows (``execute``), or keeps it open and hands out its rows a page
at a time (``start``/``fetch``), and turns SQLite's errors into the layer's ``DatabaseError``s
with the messages the app shows.

What a session cannot stop (one long C call the progress handler never sees: printf's repeat
loop, LIKE, ``trim``, ``replace``, ``instr`` of huge arguments) the app stops by killing the
worker (``process.py``), so SQLite's own functions stay as they are: no function is replaced,
and printf and instr give exactly SQLite's results.  The session only does the normal things.
"""

from __future__ import annotations

import re
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
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
    QueryOutOfMemory,
    QueryTimeout,
    ResultTooLarge,
)
from sqale_desktop.core.db.guard import WRITE_KEYWORDS, ReadOnlyGuard, denial_message, leading_keyword
from sqale_desktop.core.db.opening import (
    LOCK_RETRY_S,
    connect_readonly,
    decode_text,
    hot_journal_message,
    is_busy,
    locked_message,
)

# Bytes of values one result (execute, or all pages of a cursor) may hold in memory: rows, not
# just values, can otherwise fill memory (1,000 rows of zeroblob(6e7)).
MAX_RESULT_BYTES = 256 * 1024 * 1024
# VM instructions between progress-handler calls: small enough that a runaway query stops within
# a few milliseconds of its deadline, large enough that the Python callback costs little.
PROGRESS_STEPS = 2000
_TRAILING_SEMICOLONS = re.compile(r";[\s;]*\Z")


class Session:
    """The worker's connection to one database file; one statement runs at a time.

    ``stopped`` is the worker's Stop flag (set from its signal handler), read by the progress
    handler.  ``memory_mb`` is the worker's memory cap, named in the out-of-memory message.
    """

    def __init__(
        self,
        path: Path,
        *,
        immutable: bool,
        decode: Callable[[bytes], str] = decode_text,
        stopped: Callable[[], bool] = lambda: False,
        memory_mb: int = 0,
    ) -> None:
        self.path = path
        self._immutable = immutable
        self._decode = decode
        self._stopped = stopped
        self._memory_mb = memory_mb
        self.deadline = 0.0
        self.limit_s = 0.0
        self.timed_out = False
        self.guard = ReadOnlyGuard()
        self.conn = connect_readonly(path, immutable=immutable, decode=decode)
        self.conn.set_authorizer(self.guard)
        self.conn.set_progress_handler(self._progress, PROGRESS_STEPS)
        self._cursors: dict[int, sqlite3.Cursor] = {}

    @property
    def name(self) -> str:
        return self.path.name

    def reopened(self) -> Session:
        """A new session on the same file, opened the same way."""
        return Session(
            self.path,
            immutable=self._immutable,
            decode=self._decode,
            stopped=self._stopped,
            memory_mb=self._memory_mb,
        )

    def close(self) -> None:
        for cursor in self._cursors.values():
            cursor.close()
        self._cursors.clear()
        self.conn.close()

    # -- statements ----------------------------------------------------------------------------

    def execute(
        self, sql: str, params: Sequence[object], max_rows: int
    ) -> tuple[list[str], list[tuple[Any, ...]], bool]:
        """The statement's columns, its first ``max_rows`` rows, and whether more existed."""
        with self._translated(sql):
            cursor = self._start(sql, params)
            try:
                columns = [d[0] for d in cursor.description or ()]
                fetched = fetch_within(cursor, max_rows + 1, MAX_RESULT_BYTES)[0] if columns else []
            finally:
                cursor.close()
        return columns, fetched[:max_rows], len(fetched) > max_rows

    def start(self, key: int, sql: str, params: Sequence[object], skip: int = 0) -> list[str]:
        """Prepare ``sql`` and step it once, keeping it open as cursor ``key``; its columns.

        ``skip``: rows to pass over first (read and dropped a batch at a time, under the deadline).
        """
        with self._translated(sql):
            cursor = self._start(sql, params)
            while skip > 0 and cursor.description:
                passed = len(cursor.fetchmany(min(skip, 500)))
                if passed == 0:
                    break
                skip -= passed
        columns = [d[0] for d in cursor.description or ()]
        if columns:
            self._cursors[key] = cursor
        else:
            cursor.close()
        return columns

    def fetch(self, key: int, count: int, budget: int) -> tuple[list[tuple[Any, ...]], int]:
        """Up to ``count`` more rows of cursor ``key`` and their value bytes (see ``fetch_within``)."""
        cursor = self._cursors.get(key)
        if cursor is None:  # its connection was replaced after an interrupt (Worker._reconnect)
            raise QueryInterrupted(
                "the query was stopped together with another statement on its connection; run it again"
            )
        try:
            with self._translated(""):
                rows, used = fetch_within(cursor, count, budget)
        except BaseException:
            self.drop(key)
            raise
        if len(rows) < count:
            self.drop(key)  # the statement is done: nothing is left to keep open
        return rows, used

    def drop(self, key: int) -> None:
        cursor = self._cursors.pop(key, None)
        if cursor is not None:
            cursor.close()

    def arm(self, deadline: float, limit_s: float) -> None:
        """Set the deadline (``time.monotonic``, shared by every process) of the next step of work."""
        self.deadline = deadline
        self.limit_s = limit_s
        self.timed_out = False
        self.guard.reset()

    def _start(self, sql: str, params: Sequence[object]) -> sqlite3.Cursor:
        """Prepare and step once, trying again while another program holds the file locked.

        SQLite's own busy handler would wait inside one C call, deaf to Stop; retrying here keeps
        Stop and the time limit in charge.  Only the first step can find the file locked.
        """
        while True:
            try:
                return self.conn.execute(prepare_text(sql), tuple(params))
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                if self._stopped():
                    raise QueryInterrupted("the query was cancelled") from None
                if time.monotonic() + LOCK_RETRY_S > self.deadline:
                    raise DatabaseLocked(locked_message(self.name, self.limit_s)) from None
                time.sleep(LOCK_RETRY_S)

    def _progress(self) -> int:
        if self._stopped():
            return 1
        if time.monotonic() > self.deadline:
            self.timed_out = True
            return 1
        return 0

    def _translated(self, sql: str) -> _Translating:
        return _Translating(self, sql)

    def translate(self, exc: sqlite3.Error, sql: str) -> DatabaseError:
        """The layer's error for what SQLite raised: codes first, the message where there is none."""
        message = str(exc)
        code = getattr(exc, "sqlite_errorname", "") or ""
        if isinstance(exc, sqlite3.ProgrammingError) and "one statement at a time" in message:
            return QueryDenied("read-only: only one statement at a time is allowed")
        if self.guard.last_denial is not None:
            return QueryDenied(denial_message(sql, self.guard.last_denial))
        if message.startswith("table ") and message.endswith(" may not be modified"):
            # The schema tables: the authorizer lets pragma functions through (see guard.py).
            table = message.removeprefix("table ").removesuffix(" may not be modified")
            return QueryDenied(f"read-only: changing {table} is not allowed")
        if code == "SQLITE_INTERRUPT" or message == "interrupted":
            if self.timed_out or (not self._stopped() and time.monotonic() > self.deadline):
                return QueryTimeout(time_limit_message(self.limit_s))
            return QueryInterrupted("the query was cancelled")
        if code == "SQLITE_NOMEM" or message == "out of memory":
            return QueryOutOfMemory(out_of_memory_message(self._memory_mb))
        if code.startswith("SQLITE_CORRUPT"):
            return CorruptDatabase(f"{self.name} is corrupt: {message}")
        if code == "SQLITE_NOTADB":
            return NotADatabase(f"{self.name} is not a SQLite database ({message})")
        if code == "SQLITE_READONLY_ROLLBACK":
            return DatabaseUnreadable(hot_journal_message(str(self.path)))
        keyword = leading_keyword(sql) if sql else ""
        if keyword in WRITE_KEYWORDS or code.startswith("SQLITE_READONLY"):
            return QueryDenied(f"read-only: {keyword or 'writing'} is not allowed")
        if is_busy(exc):
            return DatabaseLocked(locked_message(self.name, self.limit_s))
        if code.startswith(("SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_LOCKED")):
            return DatabaseUnreadable(f"cannot read {self.name}: {message}")
        return QueryFailed(message)


class _Translating:
    """``with``: SQLite's and Python's value errors raised inside become the layer's errors."""

    def __init__(self, session: Session, sql: str) -> None:
        self._session = session
        self._sql = sql

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            return
        if isinstance(exc, sqlite3.Error):
            raise self._session.translate(exc, self._sql) from exc
        if isinstance(exc, (ValueError, OverflowError, UnicodeError)):
            raise QueryFailed(f"cannot run this statement: {exc}") from exc


def time_limit_message(limit_s: float) -> str:
    return f"the query ran past the {limit_s:g} s time limit and was stopped"


def out_of_memory_message(memory_mb: int) -> str:
    cap = f" ({memory_mb:,} MB)" if memory_mb else ""
    return (
        f"the query needed more memory than the database worker may use{cap} and was stopped; "
        "select fewer rows or columns, or length()/substr() of large values"
    )


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


def probe(path: Path, *, immutable: bool, wait_s: float) -> None:
    """Open ``path`` once and read its schema; raise the ``DatabaseError`` that says what is wrong.

    A file locked by another program is tried again for up to ``wait_s``.
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
                if not is_busy(exc):
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
