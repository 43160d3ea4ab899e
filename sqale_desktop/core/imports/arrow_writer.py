"""Writes Arrow columns into a new SQLite file in C: Apache Arrow's ADBC SQLite driver.

The general builder (:mod:`.builder`) hands every cell to Python's ``sqlite3``; here the driver
binds each record batch to a prepared ``INSERT`` in C.  :data:`ROWS_PER_STATEMENT` rows go in one
statement (a batch regrouped by Arrow's ``take``), which cuts the per-statement cost by a third.

Three threads: the source's batches are read and converted in one (pyarrow releases the GIL); the
driver writes in a second, pulling the batches through a queue; the calling thread only reports
progress and watches for Stop, so that Stop and Ctrl+C reach it at once (a signal is delivered to
the main thread, and the driver's own Ctrl+C handling there would cancel a statement SQLite cannot
cancel).

The driver links its own SQLite: its connection is the only one on the file it writes (two SQLite
libraries must never share an open file: their POSIX locks would not see each other), and the
result is an ordinary SQLite file that ``sqlite3`` opens afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqale_desktop.core.imports import names
from sqale_desktop.core.imports.builder import StagedTable, create_sql
from sqale_desktop.core.imports.progress import (
    ImportFailed,
    Meter,
    limit_not_disk,
    write_limit_error,
)
from sqale_desktop.core.imports.threads import ImportThread, stop_and_wait

log = logging.getLogger(__name__)

ROWS_PER_STATEMENT = 16  # measured: 1 row 4.7 s, 5 rows 3.4 s, 20 rows 2.75 s for 3.26 M rows
MAX_VARIABLES = 999  # the ``?`` of one statement, within every SQLite's limit
QUEUE_DEPTH = 4  # batches converted ahead of the writer
PAGE_SIZE = 65536  # fewer, larger pages: 13% less time to write than SQLite's default 4,096

# What a source hands over: a batch's columns (Arrow arrays of int64, float64, string or binary,
# in the table's column order), its number of rows, and the bytes of the source read so far.
Batches = Iterator[tuple[list[Any], int, int]]


class _Stopped(Exception):
    """The importing thread stopped the write (Stop, Ctrl+C, an error of its own)."""


def write(
    batches: Batches,
    types: list[Any],
    target: Path,
    staged: StagedTable,
    meter: Meter,
    label: str,
    limit: int,
) -> int:
    """Create ``staged``'s table in the new file ``target`` and write ``batches`` (their columns of
    the Arrow ``types``) into it, refused past ``limit`` bytes; the number of rows.  ``batches`` is
    read in a thread of its own: what it raises is raised here.  Nothing is committed unless every
    batch was written."""
    import pyarrow as pa

    width = len(types)
    per = max(1, min(ROWS_PER_STATEMENT, MAX_VARIABLES // max(1, width)))
    wide_schema = pa.schema([(f"p{i}", types[i % width]) for i in range(width * per)])

    handoff: queue.Queue[Any] = queue.Queue(maxsize=QUEUE_DEPTH)
    stop = threading.Event()
    done = {"rows": 0, "position": 0}  # what the writer has taken, for the progress bar
    failure: list[BaseException] = []  # the errors of both threads, the first one to raise
    busy: list[float] = []  # the reading thread's CPU seconds, for the log
    tails: list[Any] = []
    complete = threading.Event()  # the reader handed over every row

    def put(item: Any) -> None:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def produce() -> None:
        regroup = _Regrouper(per)
        try:
            for columns, count, position in batches:
                if stop.is_set():
                    return
                put((regroup.add(columns), count, position))
            put(("tail", regroup.rest(), 0))
            busy.append(time.thread_time())
        except BaseException as exc:
            failure.append(exc)
            put(("error", None, 0))

    def wide_batches() -> Iterator[Any]:
        """The batches for the driver.  A stop ends the stream instead of raising: an exception
        raised through Arrow's C++ reader is kept by it with its traceback, and released after the
        interpreter has begun to exit, which crashed it; the writer then sees the stop itself."""
        while not stop.is_set():
            try:
                item, count, position = handoff.get(timeout=0.1)
            except queue.Empty:
                continue
            if isinstance(item, str):
                if item == "tail":
                    tails.append(count)
                    complete.set()
                return
            done["rows"] += count
            done["position"] = position
            if item is not None:
                yield item

    def write_all() -> None:
        started = time.thread_time()
        try:
            stream = pa.RecordBatchReader.from_batches(wide_schema, wide_batches())
            _insert_all(target, staged, per, stream, tails, complete, limit)
            log.debug(
                "%s: reading and converting %.2f CPU-s, writing %.2f CPU-s",
                label,
                busy[0] if busy else -1.0,
                time.thread_time() - started,
            )
        except BaseException as exc:
            failure.append(exc)

    reader = ImportThread(produce, "import-read")
    writer = ImportThread(write_all, "import-write")
    reported = 0
    try:
        # Started inside the ``try``: a Ctrl+C between the two starts must still stop the first;
        # a thread left running into the interpreter's exit crashes it in Arrow's code.
        reader.start()
        writer.start()
        while True:
            finished = writer.wait(0.1)
            rows = done["rows"]  # read after the wait: a writer that has ended has counted them all
            meter.count(rows - reported, done["position"])  # raises ImportCancelled on Stop
            reported = rows
            if finished:
                break
    finally:
        stop_and_wait(stop, writer, reader)  # not Thread.join: see .threads
    if failure:
        first = next((f for f in failure if not isinstance(f, _Stopped)), failure[0])
        if isinstance(first, _Stopped):
            raise ImportFailed(f"{label} could not be imported: the writer stopped")
        import adbc_driver_manager

        if isinstance(first, adbc_driver_manager.Error):
            said = str(first).splitlines()[0] if str(first) else type(first).__name__
            if "full" in said and limit_not_disk(target.parent):
                raise write_limit_error(label, limit) from first
            # As sqlite3 says it, so that the import's one mapping of errors (a full disk) applies.
            raise sqlite3.OperationalError(said) from first
        raise first
    return reported


def _insert_all(
    target: Path,
    staged: StagedTable,
    per: int,
    batches: Any,
    tails: list[Any],
    complete: threading.Event,
    limit: int,
) -> None:
    """Create ``staged``'s table in the new file ``target`` and insert ``batches`` (``per`` rows a
    statement), then the rows left in ``tails``, in one transaction; the only connection on it.
    Committed only when ``complete`` says the batches were all the rows: a stream that ended early
    (Stop, an error) is rolled back.  The file grows to ``limit`` bytes at most (SQLite's
    ``max_page_count``: past it, SQLite's "full")."""
    import adbc_driver_sqlite.dbapi as adbc

    width = len(staged.columns)
    one = "(" + ", ".join("?" * width) + ")"
    name = names.quote(staged.name)
    conn = adbc.connect(str(target), autocommit=True)
    try:
        cursor = conn.cursor()
        try:
            for pragma in (
                f"PRAGMA page_size={PAGE_SIZE}",
                "PRAGMA journal_mode=OFF",
                "PRAGMA synchronous=OFF",
                f"PRAGMA max_page_count={max(1, limit // PAGE_SIZE)}",
            ):
                cursor.execute(pragma)
                with contextlib.suppress(Exception):
                    cursor.fetchall()
            cursor.execute(create_sql(staged))
            cursor.execute("BEGIN")
            cursor.executemany(f"INSERT INTO {name} VALUES " + ", ".join([one] * per), batches)
            if not complete.is_set():
                raise _Stopped()
            for rest in tails:
                if rest is not None and rest.num_rows:
                    cursor.executemany(f"INSERT INTO {name} VALUES {one}", rest)
            cursor.execute("COMMIT")
        finally:
            cursor.close()
    finally:
        conn.close()


class _Regrouper:
    """Turns batches of rows into batches of ``per`` rows side by side, one statement's worth each,
    in the source's order; the rows short of a whole group wait for the next batch."""

    def __init__(self, per: int) -> None:
        self.per = per
        self.pending: list[Any] | None = None
        self._indices: list[Any] = []

    def add(self, columns: list[Any]) -> Any:
        """The whole groups the rows so far make, as one record batch; None when there is none."""
        import pyarrow as pa

        if self.pending is not None and len(self.pending[0]):
            columns = [pa.concat_arrays([a, b]) for a, b in zip(self.pending, columns, strict=True)]
        n = len(columns[0]) if columns else 0
        groups = n // self.per
        whole = groups * self.per
        self.pending = [c.slice(whole) for c in columns]
        if not groups:
            return None
        if self.per == 1:
            return pa.RecordBatch.from_arrays(columns, names=[f"p{i}" for i in range(len(columns))])
        indices = self._offsets(groups)
        wide = [c.take(idx) for idx in indices for c in columns]
        return pa.RecordBatch.from_arrays(wide, names=[f"p{i}" for i in range(len(wide))])

    def _offsets(self, groups: int) -> list[Any]:
        """Row ``g * per + r`` for each group ``g``, one array per position ``r`` (cached, sliced)."""
        import numpy as np
        import pyarrow as pa

        if not self._indices or len(self._indices[0]) < groups:
            size = max(groups, 4096)
            self._indices = [pa.array(np.arange(r, size * self.per, self.per)) for r in range(self.per)]
        return [idx.slice(0, groups) for idx in self._indices]

    def rest(self) -> Any:
        import pyarrow as pa

        if self.pending is None or not len(self.pending[0]):
            return None
        return pa.RecordBatch.from_arrays(self.pending, names=[f"p{i}" for i in range(len(self.pending))])
