"""Large delimited text files at C speed: pyarrow's CSV reader parses, ADBC's SQLite driver writes.

The general text path (:mod:`.text` into :class:`.builder.Builder`) hands every cell to Python
twice, once from ``csv`` and once into ``sqlite3``; it reaches about 8 MB per CPU-second.  Here no
cell becomes a Python object:

- **Parsing**: ``pyarrow.csv`` (C++), every column read as text, empty cells null, with the layout
  the general path found (:func:`.text.sniff`: delimiter, header, title lines above it) and its
  quoting rules (RFC 4180, line breaks inside quotes).
- **Types**: decided with the general path's rules over every cell (:meth:`.types.ColumnGuess.
  update_arrow`, Arrow's RE2 kernels).  They are guessed from the first :data:`GUESS_BYTES` and
  every later batch is checked against them; a batch that changes one (a ``N/A`` in a column of
  numbers a million rows down) starts the table again, after one pass that only reads, with the
  types of the whole file.  So the result is always what the general path makes; only such a file
  costs a second pass.
- **Writing**: Apache Arrow's ADBC SQLite driver binds each record batch to a prepared ``INSERT`` in
  C; :data:`ROWS_PER_STATEMENT` rows per statement (a batch regrouped by Arrow's ``take``) cut its
  per-statement cost by a third.  Parsing and checking run in a thread beside the writer, so both
  cores work.  The driver links its own SQLite: its connection is the only one on the file it
  writes (two SQLite libraries must never share an open file: their POSIX locks would not see each
  other), and the result is an ordinary SQLite file that ``sqlite3`` opens afterwards.

What this path does not do it leaves to the general one by raising :class:`NotFast` before anything
is kept: rows with more or fewer fields than the header (the general path pads them and says so),
more columns than a table holds, a codec other than UTF-8 or bytes that are not valid UTF-8 (the
general path falls back to Latin-1), or any cell pyarrow reads differently from Python's ``csv``
(checked on the first rows).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqale_desktop.core.imports import names, text
from sqale_desktop.core.imports.builder import MAX_COLUMNS, Column, StagedTable, create_sql
from sqale_desktop.core.imports.progress import ImportFailed, Meter
from sqale_desktop.core.imports.types import BOOLEAN, INTEGER, REAL, ColumnGuess

log = logging.getLogger(__name__)

MIN_BYTES = 4 * 1024 * 1024  # smaller files take the general path: they import in well under a second
BLOCK_BYTES = 1024 * 1024  # pyarrow's read block: one record batch of about this much text
GUESS_BYTES = 8 * 1024 * 1024  # the types are guessed from this much before the first row is written
ROWS_PER_STATEMENT = 16  # measured: 1 row 4.7 s, 5 rows 3.4 s, 20 rows 2.75 s for 3.26 M rows
MAX_VARIABLES = 999  # the ``?`` of one statement, within every SQLite's limit
QUEUE_DEPTH = 4  # batches parsed ahead of the writer
PAGE_SIZE = 65536  # fewer, larger pages: 13% less time to write than SQLite's default 4,096


class NotFast(Exception):
    """The file needs the general text path; the message says why (it is logged, not shown)."""


class _Retype(Exception):
    """A batch changed a column's type after rows were written with the old one."""


def wanted(path: Path) -> bool:
    """Whether ``path`` is large enough for this path to pay (small files: the general path)."""
    return text.file_size(path) >= MIN_BYTES


def write_table(path: Path, target: Path, table_name: str, source: str, meter: Meter) -> StagedTable:
    """Import the delimited text file ``path`` as ``table_name`` into a new SQLite file ``target``.

    Returns the table's description for the builder, whose ``stage`` is the table's quoted name in
    ``target``.  Raises :class:`NotFast` (``target`` deleted, the meter rewound) when the general
    path must import the file, :class:`ImportFailed` for a file no path imports.
    """
    layout = text.sniff(path)
    if layout.codec not in ("utf-8", "utf-8-sig"):
        # Arrow decodes other codecs through a Python codec object, called from its own threads
        raise NotFast(f"encoded as {layout.codec}")
    width = len(layout.header)
    if width > MAX_COLUMNS:
        raise NotFast(f"{width:,} columns: the general path says how many a table can hold")
    if width == 0 or any(len(row) != width for row in layout.first_rows if row):
        raise NotFast("the first rows do not all have the header's number of fields")
    try:
        guesses = [ColumnGuess(layout.delimiter == ";") for _ in range(width)]
        try:
            _guess(path, layout, guesses, meter, until=GUESS_BYTES)
            kinds = [g.result() for g in guesses]
            rows = _write(path, layout, guesses, kinds, target, table_name, source, meter, check=True)
        except _Retype:  # written again, with the types of the whole file
            _forget(target, meter)
            guesses = [ColumnGuess(layout.delimiter == ";") for _ in range(width)]
            _guess(path, layout, guesses, meter, until=None)
            meter.rewind()
            kinds = [g.result() for g in guesses]
            rows = _write(path, layout, guesses, kinds, target, table_name, source, meter, check=False)
    except BaseException as exc:
        if isinstance(exc, NotFast):
            _forget(target, meter)  # the general path starts the file again
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
        raise
    staged = _staged(layout, guesses, kinds, table_name, source, rows)
    return staged


def _forget(target: Path, meter: Meter) -> None:
    """Delete what was written of ``target`` and take its rows off the meter."""
    meter.rewind()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(target)


def _staged(
    layout: text.Layout, guesses: list[ColumnGuess], kinds: list[str], table_name: str, source: str, rows: int
) -> StagedTable:
    column_names = names.unique_columns(layout.header)
    columns = [
        Column(name, raw, kind, names.quote(name))
        for name, raw, kind in zip(column_names, layout.header, kinds, strict=True)
    ]
    notes = list(layout.notes)
    if rows == 0:
        notes.append("the file has a header but no rows")
    return StagedTable(table_name, source, f"main.{names.quote(table_name)}", columns, rows, notes)


def _reader(path: Path, layout: text.Layout) -> tuple[Any, Any, Any]:
    """A pyarrow streaming reader over the data rows of ``path`` (all text), the file it reads
    (whose ``tell()`` is the bytes read from disk) and the stream to close.

    The file is opened by Arrow itself (and a ``.gz`` decompressed by it), never given to it as a
    Python file object: Arrow reads ahead in threads of its own, and a Python object read from one
    of them at the moment the interpreter exits (Ctrl+C) crashes the process."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    # Arrow's own Ctrl+C handling (a signal handler for the length of each read, with a thread that
    # wakes Python) crashed the interpreter at exit when Ctrl+C came early in an import; Python's
    # handler alone is enough here: the main thread sees KeyboardInterrupt between two batches.
    pa.enable_signal_handlers(False)
    raw = pa.OSFile(str(path))
    stream = pa.CompressedInputStream(raw, "gzip") if path.suffix.lower() == ".gz" else raw
    width = len(layout.header)
    read = pcsv.ReadOptions(
        block_size=BLOCK_BYTES,
        skip_rows_after_names=len(layout.skipped) + 1,  # CSV rows (skip_rows counts lines)
        column_names=[f"c{i}" for i in range(width)],
        encoding="utf8",  # a UTF-8 BOM is skipped by pyarrow
    )
    parse = pcsv.ParseOptions(
        delimiter=layout.delimiter,
        quote_char='"',
        double_quote=True,
        escape_char=False,
        newlines_in_values=True,
        ignore_empty_lines=True,
    )
    convert = pcsv.ConvertOptions(
        column_types={f"c{i}": pa.string() for i in range(width)},
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
    )
    try:
        reader = pcsv.open_csv(stream, read_options=read, parse_options=parse, convert_options=convert)
    except pa.ArrowException as exc:
        stream.close()
        raise NotFast(f"pyarrow cannot read it: {exc}") from exc
    except BaseException:
        stream.close()
        raise
    return reader, raw, stream


def _batches(path: Path, layout: text.Layout) -> Iterator[tuple[Any, int]]:
    """The file's record batches (all text), each with the bytes read from disk so far."""
    import pyarrow as pa

    reader, raw, stream = _reader(path, layout)
    first = True
    compressed = path.suffix.lower() == ".gz"
    parsed = 0
    try:
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except pa.ArrowException as exc:  # a ragged row, bytes that are not UTF-8, a bad .gz
                raise NotFast(f"pyarrow stops reading it: {str(exc).splitlines()[0]}") from exc
            if first:
                first = False
                expected = [[c or None for c in row] for row in layout.first_rows if row]
                got = [list(r.values()) for r in batch.slice(0, len(expected)).to_pylist()]
                if got != expected[: len(got)]:
                    raise NotFast("pyarrow splits the first rows differently from Python's csv")
            if compressed:
                yield batch, raw.tell()  # compressed bytes read (Arrow reads a few blocks ahead)
                continue
            # Arrow reads ahead many blocks (the whole of a small file at the first batch), so the
            # file's position would run ahead of the rows: the text parsed is counted instead, its
            # cells' bytes and a delimiter or line end after each.
            parsed += batch.num_rows * batch.num_columns
            parsed += sum(buffers[2].size for buffers in (c.buffers() for c in batch.columns) if buffers[2])
            yield batch, min(parsed, raw.tell())
    finally:
        reader.close()
        stream.close()


def _update(guesses: list[ColumnGuess], batch: Any) -> None:
    for guess, column in zip(guesses, batch.columns, strict=True):
        if guess.candidates:
            guess.update_arrow(column)


def _guess(
    path: Path, layout: text.Layout, guesses: list[ColumnGuess], meter: Meter, until: int | None
) -> None:
    """Narrow ``guesses`` over the batches read before ``until`` bytes of the file, or over the
    whole file (``None``: a pass of its own, shown on the meter)."""
    for batch, position in _batches(path, layout):
        _update(guesses, batch)
        if until is None:
            meter.count(batch.num_rows, position)
        elif position >= until:
            break


class _Stopped(Exception):
    """The importing thread stopped the write (Stop, Ctrl+C, an error of its own)."""


def _write(
    path: Path,
    layout: text.Layout,
    guesses: list[ColumnGuess],
    kinds: list[str],
    target: Path,
    table_name: str,
    source: str,
    meter: Meter,
    check: bool,
) -> int:
    """Write every row of ``path`` into the new file ``target`` with the column types ``kinds``;
    with ``check``, raise :class:`_Retype` when a batch does not fit them.

    Three threads: one parses, checks and converts; one writes (the ADBC driver pulls the batches
    from the first through a queue); the calling thread only reports progress and watches for
    Stop and Ctrl+C, so that both reach it at once (a signal is delivered to the main thread, and
    the driver's own Ctrl+C handling there would cancel a statement SQLite cannot cancel)."""
    import pyarrow as pa

    width = len(kinds)
    per = max(1, min(ROWS_PER_STATEMENT, MAX_VARIABLES // width))
    staged = _staged(layout, guesses, kinds, table_name, source, 0)
    types = [_arrow_type(kind) for kind in kinds]
    wide_schema = pa.schema([(f"p{i}", types[i % width]) for i in range(width * per)])

    handoff: queue.Queue[Any] = queue.Queue(maxsize=QUEUE_DEPTH)
    stop = threading.Event()
    done = {"rows": 0, "position": 0}  # what the writer has taken, for the progress bar
    failure: list[BaseException] = []  # the first error of either thread: the one to raise
    busy: list[float] = []  # the parsing thread's CPU seconds, for the log

    def put(item: Any) -> None:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def produce() -> None:
        """Parse, check, convert and regroup, beside the writer (pyarrow releases the GIL)."""
        regroup = _Regrouper(per)
        try:
            for batch, position in _batches(path, layout):
                if stop.is_set():
                    return
                if check:
                    _update(guesses, batch)
                    if [g.result() for g in guesses] != kinds:
                        raise _Retype()
                wide = regroup.add(_convert(batch, kinds, guesses))
                put((wide, batch.num_rows, position))
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

    tails: list[Any] = []
    complete = threading.Event()  # the parser handed over every row

    def write() -> None:
        started = time.thread_time()
        try:
            batches = pa.RecordBatchReader.from_batches(wide_schema, wide_batches())
            _insert_all(target, staged, per, batches, tails, complete)
            log.debug(
                "%s: parsing and checking %.2f CPU-s, writing %.2f CPU-s",
                path.name,
                busy[0] if busy else -1.0,
                time.thread_time() - started,
            )
        except BaseException as exc:
            failure.append(exc)

    parser = threading.Thread(target=produce, name="csv-parse", daemon=True)
    writer = threading.Thread(target=write, name="csv-write", daemon=True)
    reported = 0
    try:
        # Started inside the ``try``: a Ctrl+C between the two starts must still stop the first;
        # a thread left running into the interpreter's exit crashes it in Arrow's code.
        parser.start()
        writer.start()
        while True:
            writer.join(0.1)
            finished = not writer.is_alive()
            rows = done["rows"]  # read after the join: a writer that has ended has counted them all
            meter.count(rows - reported, done["position"])  # raises ImportCancelled on Stop
            reported = rows
            if finished:
                break
    finally:
        stop.set()
        _join(writer)
        _join(parser)
    if failure:
        first = next((f for f in failure if not isinstance(f, _Stopped)), failure[0])
        if isinstance(first, _Stopped):
            raise ImportFailed(f"{path.name} could not be imported: the writer stopped")
        import adbc_driver_manager

        if isinstance(first, adbc_driver_manager.Error):
            # As sqlite3 says it, so that the import's one mapping of errors (a full disk) applies.
            raise sqlite3.OperationalError(str(first).splitlines()[0]) from first
        raise first
    return reported


def _join(thread: threading.Thread) -> None:
    """Wait for ``thread`` (told to stop) to end, if it started, through a second Ctrl+C too: the
    first is on its way up already, and the thread ends within one batch."""
    while thread.ident is not None and thread.is_alive():
        with contextlib.suppress(KeyboardInterrupt):
            thread.join()


def _insert_all(
    target: Path, staged: StagedTable, per: int, batches: Any, tails: list[Any], complete: threading.Event
) -> None:
    """Create ``staged``'s table in the new file ``target`` and insert ``batches`` (``per`` rows a
    statement), then the rows left in ``tails``, in one transaction; the only connection on it.
    Committed only when ``complete`` says the batches were all the rows: a stream that ended early
    (Stop, an error) is rolled back."""
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


def _arrow_type(kind: str) -> Any:
    import pyarrow as pa

    if kind in (INTEGER, BOOLEAN):
        return pa.int64()
    if kind == REAL:
        return pa.float64()
    return pa.string()


def _convert(batch: Any, kinds: list[str], guesses: list[ColumnGuess]) -> list[Any]:
    """The batch's columns as the values SQLite stores: the general path's ``convert_sql`` rules."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = []
    for column, kind, guess in zip(batch.columns, kinds, guesses, strict=True):
        if kind == INTEGER:
            out.append(pc.cast(column, pa.int64()))
        elif kind == REAL:
            cells = pc.replace_substring(column, ",", ".") if guess.comma_seen else column
            out.append(pc.cast(cells, pa.float64()))
        elif kind == BOOLEAN:
            out.append(pc.cast(pc.equal(pc.utf8_lower(column), "true"), pa.int64()))
        else:
            out.append(column)
    return out


class _Regrouper:
    """Turns batches of rows into batches of ``per`` rows side by side, one statement's worth each,
    in the file's order; the rows short of a whole group wait for the next batch."""

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
