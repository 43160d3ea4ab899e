"""Running one statement at a time on the pool (DB Browser for SQLite's ``RunSql``).

The job opens a paged cursor and fetches the first page, so a slow statement never blocks the UI;
later pages are fetched by the grid's model as the user scrolls.  A new statement, Stop or Esc
cancels the one running: its job's Stop flag is set (seen by SQLite's progress check, and before the
statement starts) and, as a backstop, its connection is interrupted.  Results of a statement that
was replaced arrive late and are dropped, told apart by a generation number.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal

from sqale_desktop.core.db.connection import ReadOnlyDatabase
from sqale_desktop.core.db.cursor import QueryCursor
from sqale_desktop.core.db.errors import QueryInterrupted
from sqale_desktop.ui.result_model import PAGE_SIZE
from sqale_desktop.ui.workers import JobContext, TaskPool

GRID_ROW_CAP = 1_000_000
"""Rows the grid will page through before saying "truncated" (exports are not capped)."""


def twin(db: ReadOnlyDatabase) -> ReadOnlyDatabase:
    """Another handle on the same file, opened the same way (no second probe of the file)."""
    return ReadOnlyDatabase(
        db.path, immutable=db.immutable, time_limit_s=db.time_limit_s, notes=list(db.notes)
    )


@dataclass(frozen=True)
class Statement:
    """One statement to run: what runs (``sql``) and what the person wrote (``shown_sql``; a
    re-sort runs it wrapped in ORDER BY), whether the person ran it (``by_user``) and the order
    the rows come in (``sorted_by``, a re-sort's)."""

    sql: str
    shown_sql: str
    by_user: bool = False
    sorted_by: tuple[int, Qt.SortOrder] | None = None


@dataclass(frozen=True)
class Ran:
    """A statement that returned its first page."""

    statement: Statement
    cursor: QueryCursor
    first: list[Any]
    seconds: float  # in the database: the statement and its first page
    started: float = 0.0  # time.perf_counter() when Run was pressed

    def elapsed(self) -> float:
        """Seconds since Run: what the person waited, once the grid shows the result (the figure
        the panel reports; ``seconds`` alone left out the grid's own time, 4 s of 1,093 columns)."""
        return time.perf_counter() - self.started


@dataclass(frozen=True)
class Failed:
    """A statement that failed, or that Stop cancelled (``cancelled``)."""

    statement: Statement
    text: str
    cancelled: bool
    milliseconds: int


class StatementRunner(QObject):
    """Runs the panel's statements on ``pool`` over ``db``, one at a time.

    Signals:
        running_changed(bool): a statement started (True) or ended, failed or was stopped (False).
        finished(object): a ``Ran``.
        failed(object): a ``Failed``.
    """

    running_changed = Signal(bool)
    finished = Signal(object)
    failed = Signal(object)

    def __init__(self, db: ReadOnlyDatabase, pool: TaskPool, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.db = db
        self.pool = pool
        self._job: JobContext | None = None
        self._jobs: list[JobContext] = []  # every job started here or tracked, for closing safely
        self._generation = 0

    @property
    def running(self) -> bool:
        return self._job is not None

    def start(self, statement: Statement) -> None:
        """Run ``statement``, cancelling the one running."""
        self.stop()
        self._generation += 1
        generation = self._generation
        started = time.perf_counter()
        db = self.db

        def job(ctx: JobContext) -> tuple[QueryCursor, list[Any], float]:
            ctx.on_cancel(db.interrupt)  # the watchdog's backstop; the flag below is what Stop sets
            begun = time.perf_counter()
            cursor = db.cursor(statement.sql, max_rows=GRID_ROW_CAP, cancel=ctx.cancel)
            first = cursor.fetch_page(PAGE_SIZE, cancel=ctx.cancel)
            return cursor, first, time.perf_counter() - begun

        def done(result: tuple[QueryCursor, list[Any], float]) -> None:
            cursor, first, seconds = result
            if generation != self._generation:
                cursor.close()
                return
            self._ended()
            self.finished.emit(Ran(statement, cursor, first, seconds, started))

        def failed(exc: BaseException) -> None:
            if generation != self._generation:
                return
            self._ended()
            elapsed = round((time.perf_counter() - started) * 1000)
            text = str(exc) or type(exc).__name__
            cancelled = isinstance(exc, QueryInterrupted)
            self.failed.emit(Failed(statement, text, cancelled, elapsed))

        self._job = self.pool.start(job, finished=done, failed=failed)
        self._jobs.append(self._job)
        self.running_changed.emit(True)

    def stop(self) -> None:
        """Cancel the running statement, if any (the Stop button and Esc do this)."""
        if self._job is not None:
            self._job.request_cancel()
            self._ended()

    def _ended(self) -> None:
        if self._job is not None:
            self._job = None
            self.running_changed.emit(False)

    def track(self, job: JobContext) -> None:
        """Count another job on this database (an export) among those ``jobs()`` reports."""
        self._jobs.append(job)

    def jobs(self) -> list[JobContext]:
        """The jobs still running, for closing the tab only once they ended."""
        self._jobs = [job for job in self._jobs if not job.finished]
        return list(self._jobs)
