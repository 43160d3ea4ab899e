"""``QueryCursor``: the rows of one statement, handed out a page at a time.

The result grid asks for a page (500 rows) as the user scrolls, instead of loading everything.
A hard cap keeps a huge result from filling memory; it is detected by asking for one row more than
the cap, so ``truncated`` is exact.  Each page is fetched under the database's time limit and can
be stopped with ``interrupt()``.  Pure Python: the Qt table model is a thin adapter over this.
"""

from __future__ import annotations

import threading
from typing import Any

from sqale_desktop.core.db.link import MAX_RESULT_BYTES, Link, LinkReclaimed, Links


class QueryCursor:
    """Pages of rows from one statement; use it from one thread at a time.

    ``columns`` are known as soon as the cursor exists.  ``exhausted`` turns True when the last
    row (or the cap) has been handed out, after which ``fetch_page`` returns ``[]``.  ``links``:
    the database's connections (``ReadOnlyDatabase.cursor`` makes cursors); the cursor holds a
    link (its worker process, where the statement stays open) until it closes.  When the pool gave
    that worker to another database between two pages, the next page runs the statement again in
    a fresh worker and skips the rows already handed out (a read-only file gives the same rows;
    only a statement whose order is not fixed, or a file another program changed, could differ).
    """

    def __init__(
        self, links: Links, sql: str, *, max_rows: int, cancel: threading.Event | None = None
    ) -> None:
        if max_rows < 0:
            raise ValueError("max_rows must not be negative")
        self._links = links
        self._sql = sql
        self._link: Link | None = None
        self.max_rows = max_rows
        self.fetched = 0
        self.bytes = 0  # value bytes handed out so far, held to MAX_RESULT_BYTES
        self.truncated = False
        self.exhausted = False
        link = links.lease(cancel)
        key = link.new_key()
        self._key = key
        try:
            self.columns: list[str] = links.run(
                link,
                lambda drops, deadline, limit_s: ("start", drops, key, sql, (), 0, deadline, limit_s),
                sql,
                cancel=cancel,
            )
            if self.columns:
                links.cursor_opened(link)
                self._link = link
            else:
                self.exhausted = True
        finally:
            links.put_back(link)

    def fetch_page(self, n: int, cancel: threading.Event | None = None) -> list[tuple[Any, ...]]:
        """Up to ``n`` more rows; fewer (or none) once the statement or the cap runs out.

        ``cancel``: the Stop flag of the job fetching (see ``Links.run``).
        """
        if n < 0:
            raise ValueError("n must not be negative")
        link = self._link
        if self.exhausted or link is None or n == 0:
            return []
        room = self.max_rows - self.fetched
        want = min(n, room)
        # One extra row when the page would reach the cap tells whether the cap cut anything.
        count = want + 1 if want == room else want
        budget = MAX_RESULT_BYTES - self.bytes
        try:
            try:
                rows, used = self._fetch(link, count, budget, cancel)
            except LinkReclaimed:
                link = self._resume(cancel)
                rows, used = self._fetch(link, count, budget, cancel)
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
        return list(rows)

    def _fetch(
        self, link: Link, count: int, budget: int, cancel: threading.Event | None
    ) -> tuple[list[tuple[Any, ...]], int]:
        key = self._key
        try:
            rows: list[tuple[Any, ...]]
            rows, used = self._links.run(
                link,
                lambda drops, deadline, limit_s: ("fetch", drops, key, count, budget, deadline, limit_s),
                self._sql,
                new_statement=False,
                cancel=cancel,
            )
        finally:
            self._links.put_back(link)
        return rows, used

    def _resume(self, cancel: threading.Event | None) -> Link:
        """The statement again in another worker, past the rows already handed out: its worker
        went to another database while the cursor waited between pages (the pool's cap)."""
        old, self._link = self._link, None
        if old is not None:
            self._links.cursor_closed(old, self._key)
        link = self._links.lease(cancel)
        key = link.new_key()
        skip, sql = self.fetched, self._sql
        try:
            self._links.run(
                link,
                lambda drops, deadline, limit_s: ("start", drops, key, sql, (), skip, deadline, limit_s),
                sql,
                new_statement=False,
                cancel=cancel,
            )
            self._links.cursor_opened(link)
        finally:
            self._links.put_back(link)
        self._link, self._key = link, key
        return link

    def close(self) -> None:
        """Finish the statement early; safe to call more than once, never waits for the worker."""
        self.exhausted = True
        link, self._link = self._link, None
        if link is not None:
            self._links.cursor_closed(link, self._key)

    def __enter__(self) -> QueryCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
