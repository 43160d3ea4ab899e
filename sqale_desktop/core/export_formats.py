"""Result rows as text: TSV, CSV, JSON and Markdown tables, for the clipboard and for files.

Qt-free so that the same code formats the grid's "Copy as …" and the pool's file exports, and is
tested without a window.  The standard library's ``csv`` and ``json`` do the escaping.

Line endings follow the platform (LF on Linux and macOS, CRLF on Windows), which is what text
editors, terminals and spreadsheets there expect on the clipboard.  CSV files can be asked to use
CRLF everywhere, as RFC 4180 says.  Whatever the line ending, a cell that holds a CR or LF is
quoted, so a pasted or saved table keeps its shape (``csv`` alone quotes only the characters of its
own line terminator: rows are written with CRLF, which makes it quote both, and then joined).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Literal

TextFormat = Literal["tsv", "csv", "json", "markdown"]
TEXT_FORMATS: tuple[TextFormat, ...] = ("tsv", "csv", "json", "markdown")
FORMAT_NAMES: dict[TextFormat, str] = {
    "tsv": "TSV",
    "csv": "CSV",
    "json": "JSON",
    "markdown": "Markdown table",
}


def platform_newline(platform: str | None = None) -> str:
    """The platform's line ending: CRLF on Windows, LF elsewhere."""
    return "\r\n" if (platform or sys.platform).startswith("win") else "\n"


def cell_text(value: Any) -> str:
    """A cell as text: NULL as an empty field, a BLOB as an SQLite hex literal, floats exactly."""
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray | memoryview):
        return "X'" + bytes(value).hex().upper() + "'"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def json_value(value: Any) -> Any:
    """A cell as a JSON value: BLOBs become ``{"$base64": …}``, everything else stays as it is."""
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$base64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def delimited_line(cells: Sequence[str], delimiter: str) -> str:
    """One CSV/TSV record without its line ending; cells with delimiters, quotes, CR or LF quoted."""
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\r\n").writerow(cells)
    return out.getvalue()[:-2]


def _markdown_cell(value: Any) -> str:
    if value is None:
        return "NULL"
    text = cell_text(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")


def _numeric_columns(rows: Sequence[Sequence[Any]], width: int) -> list[bool]:
    numeric = [False] * width
    for column in range(width):
        values = [row[column] for row in rows if row[column] is not None]
        numeric[column] = bool(values) and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in values
        )
    return numeric


def format_rows(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    fmt: TextFormat,
    *,
    header: bool = True,
    newline: str | None = None,
) -> str:
    """``rows`` as one text in ``fmt``.

    - tsv / csv: a header record when ``header``; records joined by ``newline`` (the platform's
      by default), no line ending after the last one (as spreadsheets copy).
    - json: an array of objects keyed by column name (JSON and Markdown always name the columns).
    - markdown: a GitHub-flavoured table; numeric columns right-aligned, NULL written as NULL,
      ``|`` escaped and line breaks as ``<br>``.
    """
    end = platform_newline() if newline is None else newline
    rows = [list(row) for row in rows]
    if fmt in ("tsv", "csv"):
        delimiter = "\t" if fmt == "tsv" else ","
        lines = [delimited_line(list(columns), delimiter)] if header else []
        lines.extend(delimited_line([cell_text(v) for v in row], delimiter) for row in rows)
        return end.join(lines)
    if fmt == "json":
        records = [{name: json_value(v) for name, v in zip(columns, row, strict=False)} for row in rows]
        return json.dumps(records, ensure_ascii=False, indent=2).replace("\n", end)
    numeric = _numeric_columns(rows, len(columns))
    lines = [
        "| " + " | ".join(_markdown_cell(c) for c in columns) + " |",
        "|" + "|".join(" ---: " if n else " --- " for n in numeric) + "|",
    ]
    lines.extend("| " + " | ".join(_markdown_cell(v) for v in row) + " |" for row in rows)
    return end.join(lines)


def column_values(rows: Iterable[Sequence[Any]], column: int, newline: str | None = None) -> str:
    """One column's values, one a line (NULL as an empty line), for pasting into an IN (…) list
    or a spreadsheet column."""
    end = platform_newline() if newline is None else newline
    return end.join(cell_text(row[column]).replace("\r\n", " ").replace("\n", " ") for row in rows)
