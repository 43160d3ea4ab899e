"""What the database and its paged cursor share: one thread's link, and fetching rows under a budget.

``connection.py`` owns the links (one per thread, see its docstring) and arms them for each step of
work; ``cursor.py`` holds one link for as long as it has pages to hand out.  Both import this
module and neither imports the other's internals: the cursor sees the database only through
:class:`LinkOwner`, the few public methods it needs.
"""

from __future__ import annotations

import re
import sqlite3
import sys
import threading
import weakref
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqale_desktop.core.db.errors import ResultTooLarge
from sqale_desktop.core.db.guard import ReadOnlyGuard
from sqale_desktop.core.db.printf_guard import PrintfGuard

# Bytes of values one result (execute, or all pages of a cursor) may hold in memory: rows, not
# just values, can otherwise fill memory (1,000 rows of zeroblob(6e7)).
MAX_RESULT_BYTES = 256 * 1024 * 1024
_TRAILING_SEMICOLONS = re.compile(r";[\s;]*\Z")


@dataclass
class Link:
    """One thread's connection and the state of the operation running on it."""

    conn: sqlite3.Connection
    guard: ReadOnlyGuard
    thread: weakref.ref[threading.Thread]
    deadline: float = 0.0
    started_generation: int = 0
    timed_out: bool = False
    busy: bool = field(default=False)
    # Set by the watchdog when it had to sqlite3_interrupt this connection (see watchdog.py).
    hard_interrupted: bool = False
    state: threading.Lock = field(default_factory=threading.Lock)
    # Paged cursors still open on this connection: it outlives its thread until they close
    # (the grid fetches pages on the GUI thread from a cursor a pool thread started).  Changed
    # only through LinkOwner.cursor_opened/cursor_closed, under the owner's lock.
    open_cursors: int = 0
    # The bounded printf of this connection (None where it could not be installed); it must live
    # as long as the connection, which calls into it.
    printf: PrintfGuard | None = None

    def close(self) -> None:
        self.conn.close()
        if self.printf is not None:
            self.printf.close()


class LinkOwner(Protocol):
    """What a paged cursor needs from the database that owns its link (``ReadOnlyDatabase``)."""

    def link(self) -> Link: ...

    def operation(
        self, link: Link, sql: str, *, new_statement: bool = True
    ) -> AbstractContextManager[None]: ...

    def start(self, link: Link, sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor: ...

    def cursor_opened(self, link: Link) -> None: ...

    def cursor_closed(self, link: Link) -> None: ...


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


__all__ = ["MAX_RESULT_BYTES", "Link", "LinkOwner", "fetch_within", "prepare_text", "value_bytes"]
