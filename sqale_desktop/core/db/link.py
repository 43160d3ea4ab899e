"""The machinery the database and its paged cursor share: the database's links to worker
processes, and each step of work run on one under the time limit and Stop.

Every statement on a user's database runs in a database worker process (``worker.py``), which
holds the connection and every guard (``mode=ro``, ``query_only``, the authorizer allow-list, no
ATTACH slots, ``trusted_schema = 0``, the progress handler).  A :class:`Link` is one worker with
a session open on this database.  Each step of work leases a link (``Links.lease``: an idle one of
this database, else a worker from the app's pool, ``process.py``) and puts it back idle after
(``put_back``), so several threads that use a database at once (the model worker runs tools, the
UI's pool runs user SQL and schema loading) each get their own worker and a runaway statement on
one never queues another's, while a database used from one thread at a time needs one worker
whatever the number of threads.  A paged cursor keeps its link between pages; the pool may take
an idle link (a parked one, or one under a cursor between pages) for another database at its cap,
and the cursor then resumes in a fresh worker (``LinkReclaimed``).

Each step (``Links.run``) is checked here first (statement length, write keywords: cheap, and no
giant text crosses the pipe), then sent with its deadline.  The worker stops it the normal way at
the deadline or on Stop; when it cannot (one long C call), the app kills the worker past a short
grace and the caller gets the usual message: "ran past the N s time limit", "cancelled", or "the
query crashed the database worker" for a worker that died on its own.  A link whose worker was
killed (or whose backstop had to interrupt the connection) is retired: the next step gets a fresh
worker, and cursors open on it answer that they were stopped.

``connection.ReadOnlyDatabase`` owns one :class:`Links` and is the public face (``execute``,
``cursor``, ``interrupt``, ``close``); ``cursor.QueryCursor`` holds one link of it for as long as it
has pages to hand out.  Both import this module and neither imports the other's internals.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqale_desktop.core.db import errors
from sqale_desktop.core.db.errors import (
    DatabaseError,
    DatabaseUnreadable,
    QueryDenied,
    QueryInterrupted,
    QueryTimeout,
    StatementTooLong,
    WorkerCrashed,
)
from sqale_desktop.core.db.guard import refuse_by_keyword
from sqale_desktop.core.db.opening import MAX_SQL_CHARS, decode_text
from sqale_desktop.core.db.process import POOL, WorkerGone, WorkerProcess
from sqale_desktop.core.db.session import MAX_RESULT_BYTES, time_limit_message

# How long ``close`` lets a running statement end on its own (it has been stopped) before its
# worker is killed: quitting mid-query must take about a second at most.
CLOSE_WAIT_S = 0.7
_OPEN_LIMIT_S = 30.0


class LinkReclaimed(QueryInterrupted):
    """The link's idle worker went to another database (the pool's cap): resume elsewhere."""


@dataclass(eq=False)  # compared and hashed by identity: the pool keys its idle holders by link
class Link:
    """One worker process with a session open on one database, and the state of its step."""

    worker: WorkerProcess
    busy: bool = False
    # Serialises the round trips on this worker (a cursor another thread started may fetch here).
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Paged cursors still open on this worker: it is not put back idle until they close.  Changed
    # only through Links.cursor_opened/cursor_closed, under the owner's lock.
    open_cursors: int = 0
    # Cursors closed since the last request; the next request tells the worker (closing a cursor
    # never waits for a statement running on the same worker).
    drops: list[int] = field(default_factory=list)
    # Why the link is out of use ("stopped", "timeout", "crashed", "closed", "reclaimed"); None
    # while usable.
    retired: str | None = None
    # Set once its worker has been given back or ended: the worker may serve another link now.
    released: bool = False
    _next_key: int = 0

    def new_key(self) -> int:
        self._next_key += 1
        return self._next_key

    def reclaim(self) -> WorkerProcess | None:
        """The pool takes this idle link's worker for another database: its session is closed
        (its cursors with it), and a cursor on it resumes elsewhere.  None while a step runs."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if self.released or self.busy:
                return None
            self.released = True
            self.retired = self.retired or "reclaimed"
            worker = self.worker
            try:
                reply = worker.call(("close",), time.monotonic() + 2.0, lambda: False)
            except WorkerGone:
                worker.reap()
                return None
            if reply[0] != "ok":
                worker.kill("closed")
                worker.reap()
                return None
            return worker
        finally:
            self.lock.release()


class Links:
    """The links of one database file, and the running of work on them.

    ``time_limit_s`` is per statement (and per page fetch), settable.  ``decode`` turns SQLite text
    into ``str`` (default: invalid UTF-8 replaced); it is sent to the worker, so it must be a
    module-level function.  Every method may be called from any thread.
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
        # Every link not yet released: running a step, under a cursor, or idle.
        self._links: set[Link] = set()
        self._idle: list[Link] = []  # idle ones, most recently used last
        self._generation = 0
        self._closed = False
        POOL.prestart()

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
        """The links in use now: running a step, or held by a paged cursor."""
        with self._lock:
            return [link for link in self._links if link not in self._idle and not link.released]

    @property
    def busy(self) -> bool:
        """Whether a statement (or a cursor's page fetch) is running on any thread right now."""
        with self._lock:
            links = list(self._links)
        return any(link.busy for link in links)

    def lease(self, cancel: threading.Event | None = None) -> Link:
        """A link for one step of work: this database's idle one used last, else a new one.

        Give it back with ``put_back`` (in a ``finally``).  ``cancel`` and ``interrupt()`` stop
        a lease that waits for a worker because every one runs a step (the pool's cap).
        """
        with self._lock:
            if self._closed:
                raise DatabaseUnreadable(f"{self.name} has been closed")
            idle = list(reversed(self._idle))
        for link in idle:
            taken = POOL.take(link)  # False: the pool is reclaiming it for another database
            with self._lock:
                if link in self._idle:
                    self._idle.remove(link)
            if taken:
                return link
        return self._connect(cancel)

    def put_back(self, link: Link) -> None:
        """A step on ``link`` ended: it waits idle for the next one (or, under an open cursor,
        for the cursor's next page), reclaimable by the pool.  Retired links stay out."""
        with self._lock:
            if link.released or link.retired is not None or link not in self._links:
                return
            if link.open_cursors == 0 and link not in self._idle:
                self._idle.append(link)
            POOL.hold(link)  # under the lock: a lease never finds it idle here yet unheld there

    def cursor_opened(self, link: Link) -> None:
        """A paged cursor now holds ``link``: it stays this cursor's until the cursor closes."""
        with self._lock:
            link.open_cursors += 1

    def cursor_closed(self, link: Link, key: int) -> None:
        """Cursor ``key`` on ``link`` closed; a retired link without cursors ends its worker."""
        with self._lock:
            link.open_cursors -= 1
            release = link.retired is not None and link.open_cursors == 0
        if release:
            self._release(link)
        elif link.lock.acquire(blocking=False):
            # Closed at once (no reply awaited), so that its read lock on the file goes now.
            try:
                if link.retired is None and not link.released and link.worker.alive:
                    link.worker.send(("drop", key))
            except OSError:
                pass  # the worker died; the next step on this link says so
            finally:
                link.lock.release()
            self.put_back(link)
        else:
            with self._lock:
                link.drops.append(key)  # a step is running there: it puts the link back after

    def interrupt(self) -> None:
        """Stop whatever statement is running on any link, from any thread.

        Each running statement ends with ``QueryInterrupted``; statements started afterwards run
        normally (a step compares the generation it started in with the current one).
        """
        with self._lock:
            self._generation += 1

    def close(self, wait_s: float = CLOSE_WAIT_S) -> bool:
        """Stop running statements and end every link; later ``lease()`` calls raise.

        A statement still running on another thread is stopped and given up to ``wait_s`` to
        end, so that its thread gets ``QueryInterrupted``; then its worker is killed (the thread
        gets ``QueryInterrupted`` as well).  Every worker's connection is closed (or its process
        ended) when this returns, so the ``-shm`` bookkeeping may run.  Returns False when the
        links were already closed.
        """
        with self._lock:
            already = self._closed
            self._closed = True
            self._generation += 1
            links = list(self._links)
            self._links.clear()
            self._idle.clear()
        for link in links:
            POOL.take(link)
        deadline = time.monotonic() + wait_s
        while any(link.busy for link in links) and time.monotonic() < deadline:
            time.sleep(0.005)
        for link in links:
            if link.retired is None:
                link.retired = "closed"
            self._release(link)
        return not already

    def run(
        self,
        link: Link,
        request: Callable[[list[int], float, float], tuple[Any, ...]],
        sql: str,
        *,
        new_statement: bool = True,
        cancel: threading.Event | None = None,
    ) -> Any:
        """Run one step of work on ``link``'s worker under the time limit and Stop; its value.

        ``request(drops, deadline, limit_s)`` builds the request.  ``new_statement``: the work
        prepares ``sql`` (checked against the length limit and the write keywords first); False
        for fetching more rows of a statement that already passed.  ``cancel``: the caller's
        Stop flag, seen like ``interrupt()``; a flag set before the step begins stops it too
        (``interrupt()`` only stops what already runs).
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
        limit_s = self._time_limit_s
        generation = self._generation

        def should_stop() -> bool:
            return self._generation != generation or (cancel is not None and cancel.is_set())

        with link.lock:
            if link.retired == "reclaimed":
                raise LinkReclaimed("the query's worker went to another database; resume it")
            if link.retired is not None:
                raise self._retired_error(link.retired)
            deadline = time.monotonic() + limit_s
            with self._lock:
                drops, link.drops = link.drops, []
            link.busy = True
            try:
                reply = link.worker.call(request(drops, deadline, limit_s), deadline, should_stop)
            except WorkerGone as gone:
                self._forget(link, gone.reason)
                link.worker.reap()  # the process has ended; this thread holds its pipes
                raise self._gone_error(gone, limit_s) from None
            finally:
                link.busy = False
        if reply[0] == "ok":
            return reply[1]
        if reply[0] == "error":
            _, kind, message, retire = reply
            if retire:
                self._retire(link, "stopped")
            raise error_class(kind)(message)
        raise RuntimeError(f"the database worker failed:\n{reply[1]}")

    def _connect(self, cancel: threading.Event | None) -> Link:
        generation = self._generation

        def should_stop() -> bool:
            return self._generation != generation or (cancel is not None and cancel.is_set())

        try:
            worker = POOL.lease(should_stop, time.monotonic() + self._time_limit_s)
        except WorkerGone as gone:
            if gone.reason == "timeout":
                raise QueryTimeout(
                    f"every database worker stayed busy for {self._time_limit_s:g} s "
                    f"({POOL.max_workers} at most); run the query again"
                ) from None
            if gone.reason == "stopped":
                raise QueryInterrupted("the query was cancelled") from None
            raise DatabaseUnreadable(f"{self.name} has been closed") from None
        link = Link(worker=worker)
        request = ("open", str(self.path), self.immutable, self._decode)
        try:
            reply = worker.call(request, time.monotonic() + _OPEN_LIMIT_S, lambda: False)
        except WorkerGone as gone:
            worker.reap()
            raise self._gone_error(gone, _OPEN_LIMIT_S) from None
        if reply[0] != "ok":
            POOL.give_back(worker)
            if reply[0] == "error":
                raise error_class(reply[1])(reply[2])
            raise RuntimeError(f"the database worker failed:\n{reply[1]}")
        with self._lock:
            closing = self._closed
            if not closing:
                self._links.add(link)
        if closing:
            link.retired = "closed"
            self._release(link)
            raise DatabaseUnreadable(f"{self.name} has been closed")
        return link

    def _retire(self, link: Link, reason: str) -> None:
        """Take a link out of use: the next step gets a fresh worker.

        Its worker ends now if no cursor is open on it, else when the last one closes.
        """
        if self._forget(link, reason):
            self._release(link)

    def _forget(self, link: Link, reason: str) -> bool:
        """Mark ``link`` retired and drop it from the usable links; True if no cursor holds it."""
        POOL.take(link)
        with self._lock:
            link.retired = link.retired or reason
            self._links.discard(link)
            if link in self._idle:
                self._idle.remove(link)
            return link.open_cursors == 0

    def _release(self, link: Link) -> None:
        """Close ``link``'s session and give its worker back, or end the worker if that fails.

        A link whose lock is held has a step running (closing the database under it): its worker
        is killed, and the running step ends with ``WorkerGone("closed")`` and reaps it.  One the
        pool reclaimed has been released already.
        """
        worker = link.worker
        with self._lock:
            if link.released:
                return
            link.released = True
        if not link.lock.acquire(blocking=False):
            worker.kill("closed")
            worker.wait_ended()  # its file locks go with the process: the -shm check may follow
            return
        try:
            if not worker.alive:
                worker.reap()
                return
            if link.retired not in (None, "closed"):
                worker.kill(link.retired)
                worker.reap()
                return
            try:
                reply = worker.call(("close",), time.monotonic() + 2.0, lambda: False)
            except WorkerGone:
                worker.reap()
                return
            if reply[0] == "ok":
                POOL.give_back(worker)
            else:
                worker.kill("closed")
                worker.reap()
        finally:
            link.lock.release()

    def _retired_error(self, reason: str) -> DatabaseError:
        if reason == "closed":
            return DatabaseUnreadable(f"{self.name} has been closed")
        return QueryInterrupted("the query was stopped (its database worker was replaced); run it again")

    def _gone_error(self, gone: WorkerGone, limit_s: float) -> DatabaseError:
        if gone.reason == "timeout":
            return QueryTimeout(time_limit_message(limit_s))
        if gone.reason in ("stopped", "closed"):
            return QueryInterrupted("the query was cancelled")
        detail = f" ({gone.detail})" if gone.detail else ""
        return WorkerCrashed(
            f"the query crashed the database worker{detail}; the app is fine, and the next query "
            "runs in a fresh worker"
        )


def error_class(name: str) -> type[DatabaseError]:
    """The ``DatabaseError`` class a worker's reply names (``QueryFailed`` for any other name)."""
    found = getattr(errors, name, None)
    if isinstance(found, type) and issubclass(found, DatabaseError):
        return found
    return errors.QueryFailed


__all__ = ["CLOSE_WAIT_S", "MAX_RESULT_BYTES", "Link", "LinkReclaimed", "Links", "error_class"]
