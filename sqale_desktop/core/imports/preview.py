"""The first rows of a data file, read in a moment, for the screen while the whole file imports.

A large CSV takes seconds to minutes to import; a person who opened it wants to see at once that it
is the right file and how it reads.  The preview reads a bounded prefix of the file only (1 MB of
its decompressed bytes, so a ``.gz`` costs no more) and cuts it with the importer's own rules from
:mod:`text`: the same encoding, delimiter and header detection, the same skipped title lines and the
same column names (:func:`names.unique_columns`), so what the preview shows is what the table will
hold.  Cells stay text: the import decides the types later, from far more rows than 200.

Only delimited text gets a preview.  The other kinds would cost about what their import costs, or
are quick anyway: a JSON array is parsed whole before its first object is known, an ``.xlsx`` is a
ZIP whose sheet XML must be opened and its shared strings read, a Parquet file's first row group
can be the whole file (and Parquet and DuckDB import at columnar speed), so for them the preview is
None and the tab shows the progress alone, as before.
"""

from __future__ import annotations

import codecs
import csv
import io
from dataclasses import dataclass
from pathlib import Path

from sqale_desktop.core.imports import names
from sqale_desktop.core.imports.progress import ImportFailed
from sqale_desktop.core.imports.sources import previewable
from sqale_desktop.core.imports.text import (
    SAMPLE_BYTES,
    _inner_suffix,
    _leading_rows,
    detect_encoding,
    open_bytes,
    refuse_binary,
    sniff_delimiter,
    split_header,
)

PREVIEW_ROWS = 200
PREVIEW_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Preview:
    """The column names the table will have and its first rows, every cell as text.

    ``complete`` is True when the whole file fit in the prefix read (``rows`` is then every row,
    up to the limit)."""

    columns: list[str]
    rows: list[list[str]]
    complete: bool


def preview_source(path: Path, rows: int = PREVIEW_ROWS, max_bytes: int = PREVIEW_BYTES) -> Preview | None:
    """The preview of ``path`` when it is delimited text (see the module's docstring), else None.

    Never raises for a file the importer refuses (binary, empty, unreadable): the import says why,
    in the tab, and the preview is simply None."""
    if not previewable(Path(path)):
        return None
    try:
        return preview_text(Path(path), rows, max_bytes)
    except (OSError, EOFError, ImportFailed, UnicodeError, LookupError, csv.Error):
        return None


def preview_text(path: Path, rows: int = PREVIEW_ROWS, max_bytes: int = PREVIEW_BYTES) -> Preview | None:
    """The header and first ``rows`` rows of the delimited text file ``path``, from its first
    ``max_bytes`` bytes; None when it has no header or is plain prose (a ``.txt`` with no
    delimiter).  Raises :class:`ImportFailed` for a file that is not text."""
    stream, _ = open_bytes(path)
    try:
        prefix = stream.read(max_bytes)
        complete = not stream.read(1)
    finally:
        stream.close()
    sample = prefix[:SAMPLE_BYTES]
    if not sample.strip():
        return None
    refuse_binary(sample, path.name)
    codec = detect_encoding(sample)
    suffix = _inner_suffix(path)
    delimiter = sniff_delimiter(sample.decode(codec, errors="replace"), suffix)
    if delimiter is None and suffix == ".txt":
        return None
    # The prefix may end inside a character: the incremental decoder keeps that tail back.
    text = codecs.getincrementaldecoder(codec)(errors="replace").decode(prefix, final=complete)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter or ",")
    try:
        first = _leading_rows(reader)
    except csv.Error:
        return None  # the importer reports this line's error
    _skipped, header, data = split_header(first)
    if header is None:
        return None
    try:
        # One row more than shown: when it is there, every row shown ended before the prefix did.
        data = [r for r in data if r]
        for row in reader:
            if len(data) > rows:
                break
            if row:
                data.append(row)
    except csv.Error:
        pass  # a quote the prefix cut open: the rows read before it stand
    if not complete and len(data) <= rows and data:
        data.pop()  # the last row may be cut in the middle
    data = data[:rows]
    width = max([len(header), *map(len, data)])
    columns = names.unique_columns([*header, *([""] * (width - len(header)))])
    return Preview(columns, [r + [""] * (width - len(r)) for r in data], complete)
