"""JSON (an array of objects, or an object holding such arrays) and JSON Lines / NDJSON files.

Each object is a row and each key a column, in the order keys are first seen; a key missing from
an object is NULL there.  Scalars become text cells that the type guess reads like any other (so
``"0"`` strings in a numeric key are numbers, ``"007"`` stays text); nested objects and arrays are
kept as JSON text, which SQLite's ``json_extract`` can still read.

A top-level array, the usual shape of a large export, is read element by element
(:func:`_array_elements`): memory holds one buffer of text and one batch of rows, never the whole
file, and the progress bar follows the bytes read.  The standard library's decoder (in C) reads
each element, so values come out exactly as ``json.loads`` gives them (``NaN``, integers of any
size, the last of duplicate keys).  A top-level object is parsed whole: its arrays can only be told
apart once it is read.  JSON Lines are read line by line.

Hostile files are bounded before they cost memory or time: a row's keys are counted as they are
met (an object of a million keys is refused at the first key past :data:`.builder.MAX_COLUMNS`,
never padded into every other row); an element, a line, a top-level object and a run of blanks
have a size past which the file is refused (:data:`ELEMENT_CHARS`, :data:`OBJECT_BYTES`,
:data:`BLANK_CHARS`); blanks are skipped by a regular expression, not a Python loop; nesting
deeper than the C decoder's recursion limit, an integer past Python's 4,300 digits (kept as text)
and an escaped lone surrogate (replaced by U+FFFD, which SQLite can store) are each a message or
a value, never a traceback.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqale_desktop.core.imports.builder import MAX_COLUMNS
from sqale_desktop.core.imports.limits import ImportLimits
from sqale_desktop.core.imports.progress import ImportFailed, Meter
from sqale_desktop.core.imports.text import (
    TextTable,
    bounded_lines,
    open_bytes,
    read_sample,
    refuse_binary,
    stream_error,
)

ELEMENT_CHARS = 64 * 1024 * 1024  # one element of a top-level array (a row), in characters
OBJECT_BYTES = 256 * 1024 * 1024  # a top-level object, parsed whole (an array streams instead)
BLANK_CHARS = 64 * 1024 * 1024  # a run of white space between two values
_BLANKS = re.compile(r"[ \t\r\n]*")
# A JSON escape of a surrogate: the decoder makes a lone one a lone surrogate, which no UTF-8 holds.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_DIGITS = sys.get_int_max_str_digits() or 4300


def _whole_number(digits: str) -> int | str:
    """An integer of JSON text, or its digits as text past Python's conversion limit."""
    return int(digits) if len(digits) <= _MAX_DIGITS else digits


# Used only for what the standard decoder refused with a ValueError of Python's own (its int()):
# the digits of a huge integer are kept as text, as a CSV keeps them.
_BIG_NUMBERS = json.JSONDecoder(parse_int=_whole_number)


def _loads(text: str | bytes) -> Any:
    """``json.loads`` that keeps integers past Python's digit limit as text; the decoder's other
    refusals (``JSONDecodeError``, ``RecursionError``) are raised for the caller to word."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:
        if isinstance(text, bytes):
            text = text.decode(json.detect_encoding(text))
        return _BIG_NUMBERS.decode(text)


def _too_deep(name: str) -> ImportFailed:
    return ImportFailed(
        f"{name} is not JSON this import reads: its values are nested deeper than "
        f"{sys.getrecursionlimit():,} levels"
    )


@contextmanager
def _json_errors(name: str, unreadable: tuple[type[Exception], ...]) -> Iterator[None]:
    """Inside the block, JSON nested past Python's recursion limit and the ``unreadable`` errors
    (of the stream or the decoder) become ``ImportFailed`` with messages for people."""
    try:
        yield
    except RecursionError:
        raise _too_deep(name) from None
    except unreadable as exc:
        raise ImportFailed(f"{name} is not valid JSON: {stream_error(exc)}") from exc


def _clean(batch: list[list[str | None]]) -> None:
    """Replace the lone surrogates of ``batch``'s cells with U+FFFD, in place (rare: only for a
    file whose text holds a surrogate escape)."""
    for row in batch:
        for i, cell in enumerate(row):
            if cell is not None and _LONE_SURROGATE.search(cell):
                row[i] = _LONE_SURROGATE.sub("\ufffd", cell)


def _cell(value: Any, nested: list[bool]) -> str | None:
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    nested[0] = True
    return json.dumps(value, ensure_ascii=False)


def _rows_table(
    name: str,
    objects: Iterable[Any],
    meter: Meter,
    progress_bytes: Any,
    file_name: str,
    surrogates: Callable[[], bool],
    batch_rows: int,
) -> TextTable:
    """The table of ``objects``, in batches of ``batch_rows``; ``surrogates()`` says whether the text
    read so far held a surrogate escape (its batches are then cleaned of lone surrogates before they
    are written)."""
    headers: list[str] = []
    table = TextTable(name, headers, iter(()))

    def batches() -> Iterator[list[list[str | None]]]:
        index: dict[str, int] = {}
        nested = [False]
        batch: list[list[str | None]] = []

        def new_key(key: str) -> int:
            if len(headers) >= MAX_COLUMNS:
                raise ImportFailed(
                    f"{file_name} has objects with more than {MAX_COLUMNS:,} different keys; a SQLite "
                    f"table holds at most {MAX_COLUMNS:,} columns. Split the objects, or nest the keys "
                    "under fewer ones, and open the file again."
                )
            index[key] = len(headers)
            headers.append(_LONE_SURROGATE.sub("\ufffd", key) if surrogates() else key)
            return index[key]

        try:
            for obj in objects:
                if not isinstance(obj, dict):
                    obj = {"value": obj}
                row: list[str | None] = [None] * len(headers)
                for key, value in obj.items():
                    position = index.get(key)
                    if position is None:
                        position = new_key(key)
                        row.append(None)
                    row[position] = _cell(value, nested)
                batch.append(row)
                if len(batch) >= batch_rows:
                    if surrogates():
                        _clean(batch)
                    yield batch
                    meter.count(len(batch), progress_bytes())
                    batch = []
        except RecursionError:
            raise _too_deep(file_name) from None
        if batch:
            if surrogates():
                _clean(batch)
            yield batch
            meter.count(len(batch), progress_bytes())
        if nested[0]:
            table.notes.append("nested objects and arrays kept as JSON text (json_extract reads them)")

    table.batches = batches()
    return table


def read_json(path: Path, meter: Meter, name: str, limits: ImportLimits) -> list[TextTable]:
    """The tables of a ``.json`` file: its top-level array, or each array of objects in its
    top-level object (``{"users": [...], "metadata": {...}}``), or the object itself as one row."""
    sample = read_sample(path)
    if not sample.strip():
        raise ImportFailed(f"{path.name} is empty: there is no row to import.")
    refuse_binary(sample, path.name)
    codec = json.detect_encoding(sample)
    head = sample.decode(codec, errors="replace").lstrip("\ufeff \t\r\n")
    if head.startswith("["):
        elements = _ArrayElements(path, codec, limits.json_chunk_chars)
        return [
            _rows_table(
                name, elements, meter, elements.bytes_read, path.name, elements.surrogates, limits.batch_rows
            )
        ]
    stream, counter = open_bytes(path)
    try:
        with _json_errors(path.name, (ValueError, EOFError, OSError)):
            raw = stream.read(OBJECT_BYTES + 1)
            if len(raw) > OBJECT_BYTES:
                raise ImportFailed(
                    f"{path.name} is a single JSON value of more than {OBJECT_BYTES // 2**20:,} MB; "
                    "this import reads one that large only as an array of objects or as JSON Lines."
                )
            data = _loads(raw)
    finally:
        stream.close()
    size = counter.count
    flagged = _SURROGATE_ESCAPE_BYTES.search(raw) is not None
    del raw

    def surrogates() -> bool:
        return flagged

    if isinstance(data, list):
        return [_rows_table(name, data, meter, lambda: size, path.name, surrogates, limits.batch_rows)]
    if isinstance(data, dict):
        arrays = {
            k: v for k, v in data.items() if isinstance(v, list) and any(isinstance(x, dict) for x in v)
        }
        if arrays:
            tables = [
                _rows_table(
                    f"{name}_{key}" if len(arrays) > 1 else key,
                    rows,
                    meter,
                    lambda: size,
                    path.name,
                    surrogates,
                    limits.batch_rows,
                )
                for key, rows in arrays.items()
            ]
            left = [k for k in data if k not in arrays]
            if left:
                tables[0].notes.append(
                    "top-level keys not imported (not arrays of objects): " + ", ".join(left)
                )
            return tables
        if not data:
            raise ImportFailed(f"{path.name} holds an empty object: there is no column to import.")
        return [_rows_table(name, [data], meter, lambda: size, path.name, surrogates, limits.batch_rows)]
    raise ImportFailed(f"{path.name} holds a single JSON value, not objects to import as rows.")


class _ArrayElements:
    """The elements of the top-level JSON array in ``path``, decoded one at a time.

    An element is taken only once the delimiter after it (``,`` or ``]``) is in the buffer: a number
    cut at the buffer's end (``12`` of ``123``) would otherwise decode as a whole one.  An element
    that does not decode is read again with more text (twice as much each time, so a huge element
    costs linear time), until the end of the file says it is wrong, or it passes
    :data:`ELEMENT_CHARS`.
    """

    def __init__(self, path: Path, codec: str, chunk_chars: int) -> None:
        self.path = path
        self.codec = codec
        self.chunk_chars = chunk_chars
        self._counter: Any = None
        self.escapes = [False]  # a surrogate escape was seen in the text read

    def bytes_read(self) -> int:
        return int(self._counter.count) if self._counter is not None else 0

    def surrogates(self) -> bool:
        return self.escapes[0]

    def __iter__(self) -> Iterator[Any]:
        stream, self._counter = open_bytes(self.path)
        return _elements(self.path, codecs.getreader(self.codec)(stream), self.chunk_chars, self.escapes)


def _elements(path: Path, text: Any, chunk_chars: int, escapes: list[bool] | None = None) -> Iterator[Any]:
    """The elements of the array ``text`` holds, read ``chunk_chars`` at a time (or what an element
    needs); ``escapes[0]`` is set once a surrogate escape is read."""
    escapes = escapes if escapes is not None else [False]
    decoder = json.JSONDecoder()
    buffer = ""
    pos = 0
    consumed = 0  # characters dropped from the front of the buffer, for error positions
    ended = False

    def more() -> bool:
        nonlocal buffer, pos, consumed, ended
        if ended:
            return False
        if len(buffer) - pos > ELEMENT_CHARS:
            raise ImportFailed(
                f"{path.name} holds an element of more than {ELEMENT_CHARS // 2**20:,} million "
                f"characters (at character {consumed + pos:,}): larger than a row this import reads."
            )
        chunk = text.read(max(chunk_chars, len(buffer) - pos))
        if not chunk:
            ended = True
            return False
        if not escapes[0] and _SURROGATE_ESCAPE.search(buffer[-6:] + chunk):
            escapes[0] = True
        buffer = buffer[pos:] + chunk
        consumed += pos
        pos = 0
        return True

    def skip_space() -> None:
        nonlocal pos
        start = consumed + pos
        while True:
            pos = _BLANKS.match(buffer, pos).end()  # type: ignore[union-attr]
            if pos < len(buffer) or not more():
                return
            if consumed + pos - start > BLANK_CHARS:
                raise fail(f"more than {BLANK_CHARS // 2**20:,} million blank characters in a row")

    def fail(message: str) -> ImportFailed:
        return ImportFailed(f"{path.name} is not valid JSON: {message} (character {consumed + pos:,})")

    def decode(at: int) -> tuple[Any, int]:
        try:
            return decoder.raw_decode(buffer, at)
        except json.JSONDecodeError:
            raise
        except ValueError:  # Python's own int() refused a huge integer: kept as text
            return _BIG_NUMBERS.raw_decode(buffer, at)

    try:
        with _json_errors(path.name, (UnicodeDecodeError, EOFError, OSError)):
            more()
            if buffer.startswith("\ufeff"):
                pos = 1
            skip_space()
            if buffer[pos : pos + 1] != "[":
                raise fail("expected '['")
            pos += 1
            skip_space()
            if buffer[pos : pos + 1] == "]":
                pos += 1
            else:
                while True:
                    try:
                        value, end = decode(pos)
                    except json.JSONDecodeError as exc:
                        if more():
                            continue
                        raise fail(exc.msg) from exc
                    after = _BLANKS.match(buffer, end).end()  # type: ignore[union-attr]
                    if after >= len(buffer) and more():
                        continue  # the element may go on in the next chunk: decode it again
                    delimiter = buffer[after : after + 1]
                    if delimiter not in (",", "]"):
                        pos = after
                        raise fail("expected ',' or ']' after an element")
                    pos = after + 1
                    yield value
                    if delimiter == "]":
                        break
                    skip_space()
            skip_space()
            if pos < len(buffer):
                raise fail("extra data after the array")
    finally:
        text.close()


def read_json_lines(path: Path, meter: Meter, name: str, limits: ImportLimits) -> TextTable:
    """The table of a JSON Lines / NDJSON file: one object per line, blank lines skipped."""
    sample = read_sample(path)
    if not sample.strip():
        raise ImportFailed(f"{path.name} is empty: there is no row to import.")
    refuse_binary(sample, path.name)
    stream, counter = open_bytes(path)
    escapes = [False]

    def objects() -> Iterator[Any]:
        number = 0
        try:
            for number, line in enumerate(bounded_lines(stream, path.name), start=1):
                if not line.strip():
                    continue
                if not escapes[0] and _SURROGATE_ESCAPE_BYTES.search(line):
                    escapes[0] = True
                try:
                    yield _loads(line)
                except RecursionError:
                    raise _too_deep(path.name) from None
                except ValueError as exc:
                    raise ImportFailed(f"{path.name} line {number} is not valid JSON: {exc}") from exc
        except (EOFError, OSError) as exc:
            raise ImportFailed(f"{path.name} line {number + 1}: {stream_error(exc)}") from exc
        finally:
            stream.close()

    return _rows_table(
        name, objects(), meter, lambda: counter.count, path.name, lambda: escapes[0], limits.batch_rows
    )
