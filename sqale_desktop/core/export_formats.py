"""The one exporter: result rows as CSV, TSV, JSON or a Markdown table, for every surface.

The grid's Copy / "Copy as …" (``format_rows``), its whole-result file export (``ui/export.py``,
streaming through ``write_rows``) and ``sqale-desktop query --format csv|tsv|json|markdown``
(``write_rows`` to stdout) all write cells here, so one result gives the same bytes on each: the
clipboard only leaves off the line ending after the last line, as spreadsheets copy.  Qt-free, so
it is tested without a window; the standard library's ``csv`` and ``json`` do the escaping.

Export is not display.  The grid's cells, the CLI's ``table`` format and the model's tool outputs
go through ``core.db.render`` instead: ``NULL``, ``<blob 12 bytes>``, long text cut, made to be
read and never parsed back.  Everything here is lossless instead:

- **NULL**: an empty field in CSV and TSV (what spreadsheets and ``sqlite3 -csv`` write), ``null``
  in JSON, ``NULL`` in Markdown (a rendered table shows an empty cell as nothing at all).
- **BLOB**: the SQLite hex literal ``X'01FF'`` in every format, JSON included (as a string).  It is
  lossless, it is what SQLite's own ``quote()`` writes, so it pastes back into SQL
  (``WHERE data = X'01FF'``), and a BLOB reads the same whichever format it was copied as.  The
  price: a text cell that happens to read ``X'01FF'`` looks the same (in CSV nothing could tell them
  apart anyway); the column's declared type says which it is.
- **REAL**: Python's shortest round-trip ``repr`` (``0.1``, ``12.037037037037036``, ``1e+100``), so
  a float read back is the same float; JSON numbers carry the same digits.
- **NaN and ±infinity** (``SELECT 1e999`` is ``inf``): JSON has no such numbers, and Python's
  ``Infinity``/``NaN`` tokens are refused by strict parsers (browsers, ``jq``, Go, Rust).  They are
  written as the strings ``"inf"``, ``"-inf"``, ``"nan"``: the same text as the CSV cell, and
  unlike ``null`` not confused with NULL.  ``json.dumps`` runs with ``allow_nan=False`` so a value
  that slips past this rule raises instead of writing invalid JSON.
- **TEXT**: as stored.  Bytes that are not UTF-8 were replaced with U+FFFD when the row was read
  (``core.db.connection``), so every output encodes as UTF-8.

**Formulas** (opt-in, off by default so data round-trips): spreadsheet apps run a CSV or TSV cell
that starts with ``=``, ``+``, ``-`` or ``@`` (and strip a leading tab or CR before looking), so
``=HYPERLINK(...)`` in a shared export is a live link.  With ``sanitize_formulas`` such a text cell
(header names included) is written with a leading apostrophe, which spreadsheets show as text
(OWASP's "CSV injection" advice; DBeaver's "sanitize formulas" export option).  Numbers are never
touched: ``-1`` stored as an integer stays ``-1``.

Line endings follow the platform (LF on Linux and macOS, CRLF on Windows), which is what text
editors, terminals and spreadsheets there expect on the clipboard.  CSV files can be asked to use
CRLF everywhere, as RFC 4180 says.  Whatever the line ending, a cell that holds a CR or LF is
quoted, so a pasted or saved table keeps its shape (``csv`` alone quotes only the characters of its
own line terminator: records are formatted with CRLF, which makes it quote both, and then ended
with the chosen line ending).
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

TextFormat = Literal["tsv", "csv", "json", "markdown"]
TEXT_FORMATS: tuple[TextFormat, ...] = ("tsv", "csv", "json", "markdown")
FORMAT_NAMES: dict[TextFormat, str] = {
    "tsv": "TSV",
    "csv": "CSV",
    "json": "JSON",
    "markdown": "Markdown table",
}


class TextSink(Protocol):
    """Where ``write_rows`` writes: a text file, ``sys.stdout`` or a ``StringIO``."""

    def write(self, text: str, /) -> int: ...


def platform_newline(platform: str | None = None) -> str:
    """The platform's line ending: CRLF on Windows, LF elsewhere."""
    return "\r\n" if (platform or sys.platform).startswith("win") else "\n"


def blob_literal(value: bytes | bytearray | memoryview) -> str:
    """A BLOB as SQLite writes it in SQL (``quote()``): ``X'01FF'``."""
    return "X'" + bytes(value).hex().upper() + "'"


def cell_text(value: Any) -> str:
    """A cell in CSV, TSV and on the clipboard: NULL as an empty field, a BLOB as ``X'01FF'``,
    floats in their round-trip form (``inf``, ``nan`` included)."""
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray | memoryview):
        return blob_literal(value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def json_value(value: Any) -> Any:
    """A cell as a JSON value: NULL ``null``, numbers and text as they are, a BLOB ``"X'01FF'"``,
    a non-finite float its text (``"inf"``), anything else its ``str``."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    return cell_text(value)


def json_safe(document: Any) -> Any:
    """``document`` (dicts, lists and tuples of cells, e.g. a whole episode) with every leaf made a
    valid JSON value by ``json_value``; mapping keys are made text."""
    if isinstance(document, Mapping):
        return {str(key): json_safe(item) for key, item in document.items()}
    if isinstance(document, list | tuple):
        return [json_safe(item) for item in document]
    return json_value(document)


def json_text(document: Any, *, indent: int | None = None) -> str:
    """``document`` as strict JSON text (see ``json_safe``); non-ASCII characters kept as they are."""
    return json.dumps(json_safe(document), ensure_ascii=False, allow_nan=False, indent=indent)


def json_record(columns: Sequence[str], row: Sequence[Any]) -> str:
    """One row as a JSON object keyed by column name (a duplicate name keeps the last value)."""
    record = {name: json_value(v) for name, v in zip(columns, row, strict=False)}
    return json.dumps(record, ensure_ascii=False, allow_nan=False)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def sanitize_formula(text: str) -> str:
    """``text`` with a leading ``'`` when a spreadsheet would run it as a formula (see above)."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _csv_cell(value: Any, sanitize: bool) -> str:
    text = cell_text(value)
    return sanitize_formula(text) if sanitize and isinstance(value, str) else text


class _Records:
    """CSV/TSV records, one ``csv.writer`` and buffer reused for every row of a long export."""

    def __init__(self, delimiter: str) -> None:
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer, delimiter=delimiter, lineterminator="\r\n")

    def line(self, cells: Sequence[str]) -> str:
        """One record without its line ending; cells with delimiters, quotes, CR or LF quoted."""
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerow(cells)
        return self._buffer.getvalue()[:-2]


def _markdown_cell(value: Any) -> str:
    if value is None:
        return "NULL"
    text = cell_text(value)
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    return text.replace("\r\n", "<br>").replace("\n", "<br>").replace("\r", "<br>")


def _numeric_columns(rows: Sequence[Sequence[Any]], width: int) -> list[bool]:
    numeric = [False] * width
    for column in range(width):
        values = [row[column] for row in rows if row[column] is not None]
        numeric[column] = bool(values) and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in values
        )
    return numeric


@dataclass(frozen=True)
class TextLayout:
    """How rows are written as text: each surface (the export dialog, Copy / "Copy as …", the
    ``query`` command) decides it once and hands it to :func:`write_rows` or :func:`format_rows`,
    which read it alike, so a surface's bytes differ only where its layout does.

    ``header``: CSV and TSV start with a record of the column names (JSON and Markdown always name
    the columns); ``newline`` ends every line (the platform's when None); ``sanitize_formulas``: CSV
    and TSV text cells that a spreadsheet would run get a leading ``'`` (see the module docstring;
    the other formats are never run, so they are left alone).
    """

    fmt: TextFormat
    header: bool = True
    newline: str | None = None
    sanitize_formulas: bool = False

    @property
    def line_end(self) -> str:
        return platform_newline() if self.newline is None else self.newline


def write_rows(
    out: TextSink, columns: Sequence[str], rows: Iterable[Sequence[Any]], layout: TextLayout
) -> int:
    """Write ``rows`` to ``out`` as ``layout`` says, row by row; returns the number of rows written.

    Every line ends with the layout's line ending, the last one included.

    - tsv / csv: a header record when the layout asks for one, then one record a row.
    - json: an array of objects keyed by column name, one object a line; ``[]`` for no rows.
    - markdown: a GitHub-flavoured table; numeric columns right-aligned (so this format reads
      every row before writing), NULL written as NULL, ``|`` escaped and line breaks (CR, LF,
      CRLF) as ``<br>``.
    """
    fmt, end, sanitize = layout.fmt, layout.line_end, layout.sanitize_formulas
    count = 0
    if fmt == "json":
        out.write("[")
        for row in rows:
            out.write(("" if count == 0 else ",") + end + "  " + json_record(columns, row))
            count += 1
        out.write((end if count else "") + "]" + end)
        return count
    if fmt == "markdown":
        table = [list(row) for row in rows]
        numeric = _numeric_columns(table, len(columns))
        out.write("| " + " | ".join(_markdown_cell(c) for c in columns) + " |" + end)
        out.write("|" + "|".join(" ---: " if n else " --- " for n in numeric) + "|" + end)
        for row in table:
            out.write("| " + " | ".join(_markdown_cell(v) for v in row) + " |" + end)
        return len(table)
    records = _Records("\t" if fmt == "tsv" else ",")
    if layout.header:
        out.write(records.line([_csv_cell(c, sanitize) for c in columns]) + end)
    for row in rows:
        out.write(records.line([_csv_cell(v, sanitize) for v in row]) + end)
        count += 1
    return count


def format_rows(columns: Sequence[str], rows: Iterable[Sequence[Any]], layout: TextLayout) -> str:
    """``rows`` as one text laid out as ``layout`` says, for the clipboard: ``write_rows``'s bytes
    without the line ending after the last line (as spreadsheets copy)."""
    end = layout.line_end
    buffer = io.StringIO()
    write_rows(buffer, columns, rows, layout)
    text = buffer.getvalue()
    return text[: -len(end)] if text.endswith(end) else text


def column_values(rows: Iterable[Sequence[Any]], column: int, newline: str | None = None) -> str:
    """One column's values, one a line (NULL as an empty line), for pasting into an IN (…) list
    or a spreadsheet column; line breaks inside a value become spaces."""
    end = platform_newline() if newline is None else newline
    return end.join(_one_line(cell_text(row[column])) for row in rows)


def _one_line(text: str) -> str:
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
