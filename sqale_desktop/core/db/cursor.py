"""``QueryCursor``: the rows of one statement, handed out a page at a time.

The result grid asks for a page (500 rows) as the user scrolls, instead of loading everything.
A hard cap keeps a huge result from filling memory; it is detected by asking for one row more than
the cap, so ``truncated`` is exact.  Each page is fetched under the database's time limit and can
be stopped with ``interrupt()``.  Pure Python: the Qt table model is a thin adapter over this.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from typing import Any

from sqale_desktop.core.db.link import MAX_RESULT_BYTES, Links, fetch_within


class QueryCursor:
    """Pages of rows from one statement; use it from one thread at a time.

    ``columns`` are known as soon as the cursor exists.  ``exhausted`` turns True when the last
    row (or the cap) has been handed out, after which ``fetch_page`` returns ``[]``.  ``links``:
    the database's connections (``ReadOnlyDatabase.cursor`` makes cursors); the cursor holds this
    thread's link until it closes.
    """

    def __init__(
        self, links: Links, sql: str, *, max_rows: int, cancel: threading.Event | None = None
    ) -> None:
        if max_rows < 0:
            raise ValueError("max_rows must not be negative")
        self._links = links
        self._sql = sql
        self._link = links.link()
        self.max_rows = max_rows
        self.fetched = 0
        self.bytes = 0  # value bytes handed out so far, held to MAX_RESULT_BYTES
        self.truncated = False
        self.exhausted = False
        self._cursor: sqlite3.Cursor | None = None
        with links.operation(self._link, sql, cancel=cancel):
            self._cursor = links.start(self._link, sql)
        links.cursor_opened(self._link)
        self.columns: list[str] = [d[0] for d in self._cursor.description or ()]
        if not self.columns:
            self.close()

    def fetch_page(self, n: int, cancel: threading.Event | None = None) -> list[tuple[Any, ...]]:
        """Up to ``n`` more rows; fewer (or none) once the statement or the cap runs out.

        ``cancel``: the Stop flag of the job fetching (see ``Links.operation``).
        """
        if n < 0:
            raise ValueError("n must not be negative")
        if self.exhausted or self._cursor is None or n == 0:
            return []
        room = self.max_rows - self.fetched
        want = min(n, room)
        try:
            # One extra row when the page would reach the cap tells whether the cap cut anything.
            with self._links.operation(self._link, self._sql, new_statement=False, cancel=cancel):
                rows, used = fetch_within(
                    self._cursor, want + 1 if want == room else want, MAX_RESULT_BYTES - self.bytes
                )
        except BaseException:
            self.close()
            raise
        if want == room:
            self.truncated = len(rows) > want
            rows = rows[:want]
            self.close()
        elif len(rows) < want:
            self.close()
        self.fetched += len(rows)
        self.bytes += used
        return rows

    def close(self) -> None:
        """Finish the statement early; safe to call more than once."""
        self.exhausted = True
        if self._cursor is not None:
            # The connection may have been closed under us (database closed): nothing left to free.
            with contextlib.suppress(sqlite3.Error):
                self._cursor.close()
            self._cursor = None
            self._links.cursor_closed(self._link)

    def __enter__(self) -> QueryCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
