"""``ReadOnlyDatabase``: one SQLite file opened read-only, usable from several threads.

The database is the public face: ``execute`` for a statement's first rows, ``cursor`` for paged
ones, ``interrupt`` and ``close``, and the bookkeeping of the ``-shm`` file a WAL database gets
next to it (``shm.py``).  The connection mechanics under it (one connection per thread with the
guards, the time limit, Stop, the locked-file retries, the translation of SQLite's errors) live in
``link.py``, which the paged cursor shares; every statement runs in a database worker process
(``worker.py``) that the app can kill.  ``open_readonly`` probes a file before it is used.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqale_desktop.core.db import shm
from sqale_desktop.core.db.cursor import QueryCursor
from sqale_desktop.core.db.errors import (
    DatabaseError,
    DatabaseLocked,
    DatabaseUnreadable,
)
from sqale_desktop.core.db.link import Links, error_class
from sqale_desktop.core.db.opening import STALE_NOTE, FileFacts, decode_text, inspect_file
from sqale_desktop.core.db.process import POOL, WorkerGone

if TYPE_CHECKING:
    from sqale_desktop.core.imports.cache_bound import InUse

DEFAULT_TIME_LIMIT_S = 10.0
DEFAULT_CURSOR_CAP = 100_000
# Seconds the probe may take beyond its lock wait before its worker is killed (reading the schema
# of a sane file takes milliseconds; a file that makes SQLite spin must not hang the opening).
PROBE_SLACK_S = 30.0


@dataclass
class QueryResult:
    """The first rows of a statement; ``truncated`` is True when more rows existed than were kept."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    row_count: int
    truncated: bool
    seconds: float


class ReadOnlyDatabase:
    """A SQLite file opened read-only; see ``link.py`` for the threading model.

    Attributes: ``path``; ``immutable`` (opened with ``immutable=1`` because a WAL database sits
    in a read-only folder); ``notes`` (things the user should know, e.g. the stale snapshot);
    ``time_limit_s`` (per statement, settable).  ``shm_existed``/``wal_existed``: whether those
    files were there before anything of ours opened the file (``open_readonly`` looks before
    probing; by default they are looked at now).  ``decode`` turns SQLite text into ``str``
    (default: invalid UTF-8 replaced).
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
        decode: Callable[[bytes], str] = decode_text,
    ) -> None:
        self.path = path
        self.immutable = immutable
        self.notes = notes
        self._links = Links(path, immutable=immutable, time_limit_s=time_limit_s, decode=decode)
        # A cached import's folder is held while open: the cache's bound never removes it then.
        self._in_use = _hold_if_cached(path)
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
        return self._links.time_limit_s

    @time_limit_s.setter
    def time_limit_s(self, value: float) -> None:
        self._links.time_limit_s = value

    # -- queries -----------------------------------------------------------------------------

    def execute(self, sql: str, max_rows: int = 1000, params: Sequence[object] = ()) -> QueryResult:
        """Run one read-only statement and keep its first ``max_rows`` rows.

        ``params`` are bound to ``?`` placeholders (used for names passed to pragma functions).
        """
        if max_rows < 0:
            raise ValueError("max_rows must not be negative")
        links = self._links
        started = time.perf_counter()
        link = links.lease()
        values = tuple(params)
        try:
            columns, rows, truncated = links.run(
                link,
                lambda drops, deadline, limit_s: ("execute", drops, sql, values, max_rows, deadline, limit_s),
                sql,
            )
        finally:
            links.put_back(link)
        return QueryResult(columns, rows, len(rows), truncated, time.perf_counter() - started)

    def cursor(
        self, sql: str, *, max_rows: int = DEFAULT_CURSOR_CAP, cancel: threading.Event | None = None
    ) -> QueryCursor:
        """Start a statement whose rows are handed out page by page (see ``QueryCursor``).

        ``cancel``: the starting job's Stop flag, which stops the statement even when it is set
        before the statement begins (``interrupt()`` only stops what already runs).
        """
        return QueryCursor(self._links, sql, max_rows=max_rows, cancel=cancel)

    @property
    def busy(self) -> bool:
        """Whether a statement (or a cursor's page fetch) is running on any thread right now."""
        return self._links.busy

    def workers_in_use(self) -> dict[int, bool]:
        """This database's worker processes in use now, by process id: True for one running a
        statement, False for one held between steps (an open paged cursor's, between pages).

        Each running statement has a worker of its own: ``interrupt`` reaches every one of them,
        and a crash ends only its own statement.
        """
        return {link.worker.pid: link.busy for link in self._links.current()}

    def interrupt(self) -> None:
        """Stop whatever statement is running on this database, from any thread.

        Each running statement ends with ``QueryInterrupted`` (its worker is killed if it cannot
        stop the normal way within ``process.KILL_GRACE_S``); statements started afterwards run
        normally.
        """
        self._links.interrupt()

    def close(self) -> None:
        """Stop running statements, close every thread's connection; later calls raise.

        A statement still running on another thread is interrupted first and given a moment to
        notice; then its worker is killed.  Either way its thread gets ``QueryInterrupted``, and
        nothing is closed under a running statement (it runs in another process).
        """
        if self._links.close():
            if self._counted:
                shm.closed(self.path)
            if self._in_use is not None:
                self._in_use.release()

    def __enter__(self) -> ReadOnlyDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _hold_if_cached(path: Path) -> InUse | None:
    from sqale_desktop.core.imports import cache_bound

    return cache_bound.hold(path)


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

    The reading runs in a database worker like every statement (``session.probe``); a file
    locked by another program is tried again for up to ``wait_s`` (the time limit).
    """
    worker = POOL.lease()
    request = ("probe", str(path), immutable, wait_s)
    try:
        reply = worker.call(request, time.monotonic() + wait_s + PROBE_SLACK_S, lambda: False)
    except WorkerGone as gone:
        worker.reap()
        raise DatabaseUnreadable(
            f"cannot open {path}: the database worker ended ({gone.detail or gone.reason})"
        ) from None
    POOL.give_back(worker)
    if reply[0] == "error":
        raise error_class(reply[1])(reply[2])
    if reply[0] != "ok":
        raise RuntimeError(f"the database worker failed:\n{reply[1]}")
