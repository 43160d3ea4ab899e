"""Excel (.xlsx, .xlsm) and OpenDocument (.ods) workbooks: one table per worksheet.

``python-calamine`` (Rust's calamine) reads both formats, several times faster than openpyxl and
without holding styles in memory; it applies the 1904 date system, returns the cached values of
formulas, and names hidden sheets.  Cells are turned into text and go through the same type guess
as a CSV's, so a sheet of whole numbers is INTEGER (Excel stores every number as a float), dates
are ISO-8601 text and ``TRUE`` cells are BOOLEAN.  Merged ranges hold their value in the first cell
only, as Excel itself stores them.  A sheet's rows become Python values one batch at a time
(calamine holds the sheet's cells, compactly, in Rust), and the progress bar follows the rows read.

Formula cells whose cached value is an error (``#DIV/0!``, ``#N/A``) come from calamine empty; an
``.xlsx`` sheet that has them is read again for them (:mod:`.sheet_errors`), and they become
:class:`.types.FormulaError` cells, whose text is the error's: the type guess leaves them out, so a
column of numbers with a ``#DIV/0!`` in it stays a column of numbers, where the error is NULL
(:func:`.types.convert_sql`), and the table's notes count them.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqale_desktop.core.imports.progress import ImportFailed, Meter
from sqale_desktop.core.imports.sheet_errors import MAX_ERRORS, Errors, WorkbookErrors
from sqale_desktop.core.imports.text import TextTable, split_header
from sqale_desktop.core.imports.types import FormulaError

_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ZIP = b"PK\x03\x04"  # an .xlsx or .xlsm (an .ods is a ZIP too, whose errors calamine reads as text)
HEADER_ROWS = 20  # the first rows the header is found among (titles above it are skipped)


def _cell(value: Any) -> str | None:
    """A cell as text (None when empty).  Dispatched on the exact type, text and numbers first:
    this runs once a cell, and a workbook's cells are nearly all text and floats."""
    kind = type(value)
    if kind is str:
        return value or None
    if kind is float:
        if value.is_integer() and abs(value) < 2**53:
            return str(int(value))
        return repr(value)
    if value is None:
        return None
    if kind is bool:
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def _is_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a Rust panic inside calamine, which pyo3 raises as ``PanicException``, a
    ``BaseException`` (a date cell of 1e300 panics in its date conversion): a bad file, not a bug
    of ours, and no reason to let it through ``except Exception`` to the top."""
    return type(exc).__name__ == "PanicException"


def _refused(path: Path, exc: BaseException) -> ImportFailed:
    said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ImportFailed(f"{path.name} is not a workbook this import reads: calamine stopped on it ({said})")


def read_workbook(path: Path, meter: Meter, prefix: str | None, batch_rows: int) -> list[TextTable]:
    """The worksheets of the workbook ``path`` that hold cells, as tables named after the sheets
    (``prefix_sheet`` inside a folder), in batches of ``batch_rows`` rows."""
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head == _OLE2:
        raise ImportFailed(
            f"{path.name} is password-protected (encrypted) or an old binary .xls workbook; "
            "open it in Excel or LibreOffice, save it without a password as .xlsx, and open that."
        )
    from python_calamine import CalamineError, CalamineWorkbook, SheetTypeEnum, SheetVisibleEnum

    try:
        book = CalamineWorkbook.from_path(str(path))
    except (CalamineError, OSError, ValueError) as exc:
        raise ImportFailed(f"{path.name} is not a readable workbook: {exc}") from exc
    except BaseException as exc:
        if _is_panic(exc):
            raise _refused(path, exc) from None
        raise
    tables: list[TextTable] = []
    skipped: list[str] = []
    progress = _Progress(meter, path.stat().st_size)
    errors = WorkbookErrors(path) if head[:4] == _ZIP and path.suffix.lower() != ".ods" else None
    for meta in book.sheets_metadata:
        if meta.typ not in (SheetTypeEnum.WorkSheet,):
            skipped.append(f"{meta.name} (a {str(meta.typ).split('.')[-1]} sheet)")
            continue
        try:
            sheet = book.get_sheet_by_name(meta.name)
        except (CalamineError, ValueError) as exc:
            skipped.append(f"{meta.name} ({exc})")
            continue
        except BaseException as exc:
            if not _is_panic(exc):
                raise
            skipped.append(
                f"{meta.name} (calamine stopped on it: {str(exc).splitlines()[0] if str(exc) else 'a panic'})"
            )
            continue
        sheet_errors = errors.of_sheet(meta.name) if errors is not None else {}
        rows = _rows(sheet, path, sheet_errors)
        first = list(itertools.islice(rows, HEADER_ROWS))
        above, header, _data = split_header([[c or "" for c in row] for row in first])
        if header is None:
            skipped.append(f"{meta.name} (empty)")
            continue
        progress.total_rows += sheet.height
        name = f"{prefix}_{meta.name}" if prefix else meta.name
        data = itertools.chain(first[len(above) + 1 :], rows)
        table = TextTable(name, list(header), _batches(data, progress, len(above) + 1, batch_rows))
        table.formula_errors = bool(sheet_errors)
        if above:
            table.notes.append(f"{len(above)} row(s) above the header skipped")
        if meta.visible != SheetVisibleEnum.Visible:
            table.notes.append(f"sheet {meta.name} is hidden in the workbook")
        tables.append(table)
    if not tables:
        raise ImportFailed(f"{path.name} has no worksheet with cells to import.")
    if errors is not None and errors.capped:
        tables[0].notes.append(
            f"a sheet has more than {MAX_ERRORS:,} formula error cells: the ones past those are empty"
        )
    if skipped:
        tables[0].notes.append("sheets not imported: " + ", ".join(skipped))
    return tables


def _rows(sheet: Any, path: Path, errors: Errors) -> Iterator[list[str | None]]:
    """The sheet's rows as text cells, one at a time, from its first used row and column (what
    ``to_python(skip_empty_area=True)`` gives, without a Python copy of the whole sheet), with its
    formula ``errors`` in their cells.  A panic of calamine's while it converts a row is a message
    naming the file."""
    try:
        start = sheet.start
        first_row, first_column = start or (0, 0)
        if errors:  # calamine's used range should hold them; where it does not, they widen it
            top, left = min(errors), min(min(columns) for columns in errors.values())
            first_row, first_column = (min(first_row, top), min(first_column, left)) if start else (top, left)
        read = 0
        for index, row in enumerate(sheet.iter_rows()):
            read = index + 1
            if index >= first_row:
                cells = [v if type(v) is str and v else _cell(v) for v in row]  # text inline
                if index in errors:
                    _put(cells, errors[index])
                yield cells[first_column:]
        for below in range(max(read, first_row), max(errors, default=-1) + 1):  # past calamine's rows
            cells = []
            _put(cells, errors.get(below, {}))
            yield cells[first_column:]
    except BaseException as exc:
        if _is_panic(exc):
            raise _refused(path, exc) from None
        if isinstance(exc, ValueError | OverflowError):
            raise _refused(path, exc) from exc
        raise


def _put(cells: list[str | None], errors: dict[int, str]) -> None:
    """Write a row's formula ``errors`` into its ``cells`` (widening it for one past its end)."""
    for column, text in errors.items():
        if column >= len(cells):
            cells.extend(None for _ in range(column + 1 - len(cells)))
        cells[column] = FormulaError(text)


class _Progress:
    """Rows read of every sheet, shown as the same share of the workbook's bytes: a workbook is
    compressed XML read whole by calamine, so its rows are the only measure of how far it is."""

    def __init__(self, meter: Meter, size: int) -> None:
        self.meter = meter
        self.size = size
        self.total_rows = 0
        self.rows_read = 0

    def count(self, imported: int, read: int) -> None:
        self.rows_read += read
        share = min(1.0, self.rows_read / self.total_rows) if self.total_rows else 1.0
        self.meter.count(imported, int(self.size * share))


def _batches(
    rows: Iterator[list[str | None]], progress: _Progress, already_read: int, batch_rows: int
) -> Iterator[list[list[str | None]]]:
    """Batches of the non-empty ``rows``; ``already_read``: the sheet's rows read before them."""
    read = already_read
    while chunk := list(itertools.islice(rows, batch_rows)):
        batch = [row for row in chunk if row.count(None) < len(row)]
        read += len(chunk)
        yield batch
        progress.count(len(batch), read)
        read = 0
