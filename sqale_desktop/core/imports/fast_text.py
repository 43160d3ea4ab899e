"""Large delimited text files at C speed: pyarrow's CSV reader parses, ADBC's SQLite driver writes.

The general text path (:mod:`.text` into :class:`.builder.Builder`) hands every cell to Python
twice, once from ``csv`` and once into ``sqlite3``; it reaches about 8 MB per CPU-second.  Here no
cell becomes a Python object:

- **Parsing**: ``pyarrow.csv`` (C++), every column read as text, empty cells null, with the layout
  the general path found (:func:`.text.sniff`: delimiter, header, title lines above it) and its
  quoting rules (RFC 4180, line breaks inside quotes).
- **Types**: decided with the general path's rules over every cell (:meth:`.types.ColumnGuess.
  update` over :class:`.types.ArrowCells`: Arrow's casts and RE2 kernels).  They are guessed from
  the first ``guess_bytes`` (:class:`.limits.ImportLimits`) and every later batch is checked
  against them; a batch that changes one (a ``N/A`` in a column of numbers a million rows down)
  starts the table again, after one pass that only reads, with the types of the whole file.  So
  the result is always what the general path makes; only such a file costs a second pass.
- **Writing**: :mod:`.arrow_writer` (Apache Arrow's ADBC SQLite driver, in C), with parsing and
  checking in a thread beside it, so both cores work.

- **Codecs**: Arrow reads UTF-8 itself; a file in another codec (cp1252, Latin-1, UTF-16) is
  first copied as UTF-8 beside the file being built (:func:`_write_transcoded` says why not
  Arrow's own decoding), and bytes that are not UTF-8 far down, or that the codec does not
  define, make it a Latin-1 copy, with the general path's note.

What this path does not do it leaves to the general one by raising :class:`NotFast` before anything
is kept: rows with more or fewer fields than the header (the general path pads them and says so),
more columns than a table holds, or any cell pyarrow reads differently from Python's ``csv``
(checked on the first rows).
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import gzip
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.imports import arrow_writer, names, text
from sqale_desktop.core.imports.builder import MAX_COLUMNS, Column, StagedTable
from sqale_desktop.core.imports.limits import ImportLimits
from sqale_desktop.core.imports.progress import Meter, write_limit_error
from sqale_desktop.core.imports.types import (
    BOOLEAN,
    INTEGER,
    REAL,
    ArrowCells,
    ColumnGuess,
    date_notes,
    iso_dates_arrow,
)

UTF8_CODECS = ("utf-8", "utf-8-sig")  # what Arrow reads itself (it skips a UTF-8 BOM)


class NotFast(KnownError):
    """The file needs the general path; the message says why (it is logged, not shown: it is a
    known error only so that, if one ever escaped, it would read as a message, not a bug)."""


class _Retype(Exception):
    """A batch changed a column's type after rows were written with the old one."""


class _NotUtf8(NotFast):
    """Bytes past the sample are not UTF-8: the file is read again as Latin-1."""


@dataclass(frozen=True)
class _Utf8Text:
    """What Arrow reads: ``path`` (the source, or its UTF-8 copy) with the source's ``layout``;
    ``scale`` turns the bytes read of it into the source's bytes, for the progress bar."""

    path: Path
    layout: text.Layout
    scale: float
    limits: ImportLimits


def wanted(path: Path, limits: ImportLimits) -> bool:
    """Whether ``path`` is large enough for this path to pay (small files: the general path)."""
    return text.file_size(path) >= limits.fast_text_bytes


def write_table(
    path: Path, target: Path, table_name: str, source: str, meter: Meter, limits: ImportLimits
) -> StagedTable:
    """Import the delimited text file ``path`` as ``table_name`` into a new SQLite file ``target``.

    Returns the table's description for the builder, whose ``stage`` is the table's quoted name in
    ``target``.  Raises :class:`NotFast` (``target`` deleted, the meter rewound) when the general
    path must import the file, :class:`ImportFailed` for a file no path imports.
    """
    layout = text.sniff(path)
    if layout.codec in UTF8_CODECS:
        try:
            return _write_utf8(_Utf8Text(path, layout, 1.0, limits), target, table_name, source, meter)
        except _NotUtf8:
            # As the general path does when UTF-8 fails part-way: the whole file read as Latin-1.
            layout = text.sniff(path, encoding="latin-1")
            layout.notes.append(text.MIXED_ENCODING_NOTE)
    return _write_transcoded(path, layout, target, table_name, source, meter, limits)


def _write_transcoded(
    path: Path,
    layout: text.Layout,
    target: Path,
    table_name: str,
    source: str,
    meter: Meter,
    limits: ImportLimits,
) -> StagedTable:
    """Import ``path``, in a codec other than UTF-8, through a UTF-8 copy of it beside ``target``.

    Arrow can decode other codecs only through a Python codec object that it calls from its own
    read-ahead threads (``ReadOptions.encoding``, ``transcoding_input_stream``), and Python code
    run from Arrow's threads as the interpreter exits (Ctrl+C) crashes it; so the copy is made here,
    in the import's thread, at a few hundred MB/s, and Arrow reads it as it reads any UTF-8 file.
    A byte the codec does not define turns the copy into Latin-1, as in the general path.
    """
    scratch = target.with_name(target.name + ".utf-8.txt")
    try:
        try:
            _transcode(path, layout.codec, scratch, meter, limits)
        except UnicodeDecodeError:
            layout = text.sniff(path, encoding="latin-1")
            layout.notes.append(text.MIXED_ENCODING_NOTE)
            _transcode(path, "latin-1", scratch, meter, limits)
        # Progress counts the source's bytes: the copy's are scaled back to them.
        scale = text.file_size(path) / max(1, text.file_size(scratch))
        readable = _Utf8Text(scratch, dataclasses.replace(layout, codec="utf-8"), scale, limits)
        return _write_utf8(readable, target, table_name, source, meter)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)


def _transcode(path: Path, codec: str, scratch: Path, meter: Meter, limits: ImportLimits) -> None:
    """Write ``path`` (decompressed) as UTF-8 into ``scratch``; raises ``UnicodeDecodeError`` for
    a byte ``codec`` does not define.  Stop is seen between blocks; no rows are counted."""
    decoder = codecs.getincrementaldecoder(codec)(errors="strict")
    stream, _counter = text.open_bytes(path)
    limit = limits.write_bytes
    try:
        with open(scratch, "wb") as out:
            while block := stream.read(limits.transcode_bytes):
                out.write(decoder.decode(block).encode("utf-8"))
                meter.check()
                if out.tell() > limit:
                    raise write_limit_error(path.name, limit)
            out.write(decoder.decode(b"", final=True).encode("utf-8"))
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:  # the general path says what is wrong
        raise NotFast(f"it cannot be decompressed: {exc}") from exc
    finally:
        stream.close()


def _write_utf8(readable: _Utf8Text, target: Path, table_name: str, source: str, meter: Meter) -> StagedTable:
    """Import the UTF-8 text ``readable`` into ``target`` (see :func:`write_table`)."""
    layout = readable.layout
    width = len(layout.header)
    if width > MAX_COLUMNS:
        raise NotFast(f"{width:,} columns: the general path says how many a table can hold")
    if width == 0 or any(len(row) != width for row in layout.first_rows if row):
        raise NotFast("the first rows do not all have the header's number of fields")
    try:
        guesses = [ColumnGuess(layout.delimiter == ";") for _ in range(width)]
        try:
            _guess(readable, guesses, meter, until=readable.limits.guess_bytes)
            staged = _staged(layout, [g.result() for g in guesses], table_name, source)
            rows = _write(readable, guesses, staged, target, meter, check=True)
        except _Retype:  # written again, with the types of the whole file
            _forget(target, meter)
            guesses = [ColumnGuess(layout.delimiter == ";") for _ in range(width)]
            _guess(readable, guesses, meter, until=None)
            meter.rewind()
            staged = _staged(layout, [g.result() for g in guesses], table_name, source)
            rows = _write(readable, guesses, staged, target, meter, check=False)
    except BaseException as exc:
        if isinstance(exc, NotFast):
            _forget(target, meter)  # the general path starts the file again
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
        raise
    staged.rows = rows
    staged.notes += date_notes([c.name for c in staged.columns], guesses)
    if rows == 0:
        staged.notes.append("the file has a header but no rows")
    return staged


def _forget(target: Path, meter: Meter) -> None:
    """Delete what was written of ``target`` and take its rows off the meter."""
    meter.rewind()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(target)


def _staged(layout: text.Layout, kinds: list[str], table_name: str, source: str) -> StagedTable:
    """The table as its CREATE statement needs it: the row count is set once it is written."""
    column_names = names.unique_columns(layout.header)
    columns = [
        Column(name, raw, kind, names.quote(name))
        for name, raw, kind in zip(column_names, layout.header, kinds, strict=True)
    ]
    return StagedTable(table_name, source, f"main.{names.quote(table_name)}", columns, 0, list(layout.notes))


def _reader(path: Path, layout: text.Layout, block_bytes: int) -> tuple[Any, Any, Any]:
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
        block_size=block_bytes,
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


def _batches(readable: _Utf8Text) -> Iterator[tuple[Any, int]]:
    """The file's record batches (all text), each with the source's bytes read from disk so far."""
    import pyarrow as pa

    path, layout = readable.path, readable.layout
    reader, raw, stream = _reader(path, layout, readable.limits.block_bytes)
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
                first_line = str(exc).splitlines()[0]
                if "invalid UTF8" in first_line:
                    raise _NotUtf8(f"pyarrow stops reading it: {first_line}") from exc
                raise NotFast(f"pyarrow stops reading it: {first_line}") from exc
            if first:
                first = False
                expected = [[c or None for c in row] for row in layout.first_rows if row]
                got = [list(r.values()) for r in batch.slice(0, len(expected)).to_pylist()]
                if got != expected[: len(got)]:
                    raise NotFast("pyarrow splits the first rows differently from Python's csv")
            if compressed:
                yield batch, int(raw.tell() * readable.scale)  # compressed bytes (Arrow reads ahead)
                continue
            # Arrow reads ahead many blocks (the whole of a small file at the first batch), so the
            # file's position would run ahead of the rows: the text parsed is counted instead, its
            # cells' bytes and a delimiter or line end after each.
            parsed += batch.num_rows * batch.num_columns
            parsed += sum(buffers[2].size for buffers in (c.buffers() for c in batch.columns) if buffers[2])
            yield batch, int(min(parsed, raw.tell()) * readable.scale)
    finally:
        reader.close()
        stream.close()


def _update(guesses: list[ColumnGuess], batch: Any) -> None:
    for guess, column in zip(guesses, batch.columns, strict=True):
        if guess.candidates:
            guess.update(ArrowCells(column))


def _guess(readable: _Utf8Text, guesses: list[ColumnGuess], meter: Meter, until: int | None) -> None:
    """Narrow ``guesses`` over the batches read before ``until`` bytes of the file, or over the
    whole file (``None``: a pass of its own, shown on the meter)."""
    for batch, position in _batches(readable):
        _update(guesses, batch)
        if until is None:
            meter.count(batch.num_rows, position)
        elif position >= until:
            break


def _write(
    readable: _Utf8Text,
    guesses: list[ColumnGuess],
    staged: StagedTable,
    target: Path,
    meter: Meter,
    check: bool,
) -> int:
    """Write every row of ``readable`` into the new file ``target`` as the table ``staged`` with its
    columns' types; with ``check``, raise :class:`_Retype` when a batch does not fit them."""
    kinds = [column.type for column in staged.columns]

    def converted() -> Iterator[tuple[list[Any], int, int]]:
        for batch, position in _batches(readable):
            if check:
                _update(guesses, batch)
                if [g.result() for g in guesses] != kinds:
                    raise _Retype()
            yield _convert(batch, kinds, guesses), batch.num_rows, position

    types = [_arrow_type(kind) for kind in kinds]
    limit = readable.limits.write_bytes
    return arrow_writer.write(converted(), types, target, staged, meter, staged.source, limit)


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
        elif guess.date_layout is not None:
            out.append(iso_dates_arrow(column, guess.date_layout))
        else:
            out.append(column)
    return out
