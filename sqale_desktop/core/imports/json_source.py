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
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sqale_desktop.core.imports.progress import ImportFailed, Meter
from sqale_desktop.core.imports.text import BATCH_ROWS, TextTable, open_bytes, read_sample, refuse_binary


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


def _rows_table(name: str, objects: Iterable[Any], meter: Meter, progress_bytes: Any) -> TextTable:
    headers: list[str] = []
    table = TextTable(name, headers, iter(()))

    def batches() -> Iterator[list[list[str | None]]]:
        index: dict[str, int] = {}
        nested = [False]
        batch: list[list[str | None]] = []
        for obj in objects:
            if not isinstance(obj, dict):
                obj = {"value": obj}
            row: list[str | None] = [None] * len(headers)
            for key, value in obj.items():
                position = index.get(key)
                if position is None:
                    position = index[key] = len(headers)
                    headers.append(key)
                    row.append(None)
                row[position] = _cell(value, nested)
            batch.append(row)
            if len(batch) >= BATCH_ROWS:
                yield batch
                meter.count(len(batch), progress_bytes())
                batch = []
        if batch:
            yield batch
            meter.count(len(batch), progress_bytes())
        if nested[0]:
            table.notes.append("nested objects and arrays kept as JSON text (json_extract reads them)")

    table.batches = batches()
    return table


def read_json(path: Path, meter: Meter, name: str) -> list[TextTable]:
    """The tables of a ``.json`` file: its top-level array, or each array of objects in its
    top-level object (``{"users": [...], "metadata": {...}}``), or the object itself as one row."""
    sample = read_sample(path)
    if not sample.strip():
        raise ImportFailed(f"{path.name} is empty: there is no row to import.")
    refuse_binary(sample, path.name)
    codec = json.detect_encoding(sample)
    head = sample.decode(codec, errors="replace").lstrip("\ufeff \t\r\n")
    if head.startswith("["):
        elements = _ArrayElements(path, codec)
        return [_rows_table(name, elements, meter, elements.bytes_read)]
    stream, counter = open_bytes(path)
    try:
        data = json.loads(stream.read())
    except (ValueError, EOFError, OSError) as exc:
        raise ImportFailed(f"{path.name} is not valid JSON: {exc}") from exc
    finally:
        stream.close()
    size = counter.count
    if isinstance(data, list):
        return [_rows_table(name, data, meter, lambda: size)]
    if isinstance(data, dict):
        arrays = {
            k: v for k, v in data.items() if isinstance(v, list) and any(isinstance(x, dict) for x in v)
        }
        if arrays:
            tables = [
                _rows_table(f"{name}_{key}" if len(arrays) > 1 else key, rows, meter, lambda: size)
                for key, rows in arrays.items()
            ]
            left = [k for k in data if k not in arrays]
            if left:
                tables[0].notes.append(
                    "top-level keys not imported (not arrays of objects): " + ", ".join(left)
                )
            return tables
        return [_rows_table(name, [data], meter, lambda: size)]
    raise ImportFailed(f"{path.name} holds a single JSON value, not objects to import as rows.")


CHUNK_CHARS = 1 << 20
_WHITESPACE = " \t\r\n"


class _ArrayElements:
    """The elements of the top-level JSON array in ``path``, decoded one at a time.

    An element is taken only once the delimiter after it (``,`` or ``]``) is in the buffer: a number
    cut at the buffer's end (``12`` of ``123``) would otherwise decode as a whole one.  An element
    that does not decode is read again with more text (twice as much each time, so a huge element
    costs linear time), until the end of the file says it is wrong.
    """

    def __init__(self, path: Path, codec: str) -> None:
        self.path = path
        self.codec = codec
        self._counter: Any = None

    def bytes_read(self) -> int:
        return int(self._counter.count) if self._counter is not None else 0

    def __iter__(self) -> Iterator[Any]:
        stream, self._counter = open_bytes(self.path)
        return _elements(self.path, codecs.getreader(self.codec)(stream))


def _elements(path: Path, text: Any) -> Iterator[Any]:
    decoder = json.JSONDecoder()
    buffer = ""
    pos = 0
    consumed = 0  # characters dropped from the front of the buffer, for error positions
    ended = False

    def more() -> bool:
        nonlocal buffer, pos, consumed, ended
        if ended:
            return False
        chunk = text.read(max(CHUNK_CHARS, len(buffer) - pos))
        if not chunk:
            ended = True
            return False
        buffer = buffer[pos:] + chunk
        consumed += pos
        pos = 0
        return True

    def skip_space() -> None:
        nonlocal pos
        while True:
            while pos < len(buffer) and buffer[pos] in _WHITESPACE:
                pos += 1
            if pos < len(buffer) or not more():
                return

    def fail(message: str) -> ImportFailed:
        return ImportFailed(f"{path.name} is not valid JSON: {message} (character {consumed + pos})")

    try:
        try:
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
                        value, end = decoder.raw_decode(buffer, pos)
                    except json.JSONDecodeError as exc:
                        if more():
                            continue
                        raise fail(exc.msg) from exc
                    after = end
                    while after < len(buffer) and buffer[after] in _WHITESPACE:
                        after += 1
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
        except (UnicodeDecodeError, EOFError, OSError) as exc:
            raise ImportFailed(f"{path.name} is not valid JSON: {exc}") from exc
    finally:
        text.close()


def read_json_lines(path: Path, meter: Meter, name: str) -> TextTable:
    """The table of a JSON Lines / NDJSON file: one object per line, blank lines skipped."""
    sample = read_sample(path)
    if not sample.strip():
        raise ImportFailed(f"{path.name} is empty: there is no row to import.")
    refuse_binary(sample, path.name)
    stream, counter = open_bytes(path)

    def objects() -> Iterator[Any]:
        try:
            for number, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except ValueError as exc:
                    raise ImportFailed(f"{path.name} line {number} is not valid JSON: {exc}") from exc
        finally:
            stream.close()

    return _rows_table(name, objects(), meter, lambda: counter.count)
