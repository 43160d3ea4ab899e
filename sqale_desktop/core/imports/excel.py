"""Excel (.xlsx, .xlsm) and OpenDocument (.ods) workbooks: one table per worksheet.

``python-calamine`` (Rust's calamine) reads both formats, several times faster than openpyxl and
without holding styles in memory; it applies the 1904 date system, returns the cached values of
formulas, and names hidden sheets.  Cells are turned into text and go through the same type guess
as a CSV's, so a sheet of whole numbers is INTEGER (Excel stores every number as a float), dates
are ISO-8601 text and ``TRUE`` cells are BOOLEAN.  Merged ranges hold their value in the first cell
only, as Excel itself stores them.  A sheet's rows become Python values one batch at a time
(calamine holds the sheet's cells, compactly, in Rust), and the progress bar follows the rows read.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqale_desktop.core.imports.progress import ImportFailed, Meter
from sqale_desktop.core.imports.text import BATCH_ROWS, TextTable, split_header

_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
HEADER_ROWS = 20  # the first rows the header is found among (titles above it are skipped)


def _cell(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 2**53:
            return str(int(value))
        return repr(value)
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


def read_workbook(path: Path, meter: Meter, prefix: str | None) -> list[TextTable]:
    """The worksheets of the workbook ``path`` that hold cells, as tables named after the sheets
    (``prefix_sheet`` inside a folder)."""
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
        rows = _rows(sheet, path)
        first = list(itertools.islice(rows, HEADER_ROWS))
        above, header, _data = split_header([[c or "" for c in row] for row in first])
        if header is None:
            skipped.append(f"{meta.name} (empty)")
            continue
        progress.total_rows += sheet.height
        name = f"{prefix}_{meta.name}" if prefix else meta.name
        data = itertools.chain(first[len(above) + 1 :], rows)
        table = TextTable(name, list(header), _batches(data, progress, len(above) + 1))
        if above:
            table.notes.append(f"{len(above)} row(s) above the header skipped")
        if meta.visible != SheetVisibleEnum.Visible:
            table.notes.append(f"sheet {meta.name} is hidden in the workbook")
        tables.append(table)
    if not tables:
        raise ImportFailed(f"{path.name} has no worksheet with cells to import.")
    if skipped:
        tables[0].notes.append("sheets not imported: " + ", ".join(skipped))
    return tables


def _rows(sheet: Any, path: Path) -> Iterator[list[str | None]]:
    """The sheet's rows as text cells, one at a time, from its first used row and column (what
    ``to_python(skip_empty_area=True)`` gives, without a Python copy of the whole sheet).  A panic
    of calamine's while it converts a row is a message naming the file."""
    try:
        first_row, first_column = sheet.start or (0, 0)
        for index, row in enumerate(sheet.iter_rows()):
            if index >= first_row:
                yield [_cell(v) for v in row[first_column:]]
    except BaseException as exc:
        if _is_panic(exc):
            raise _refused(path, exc) from None
        if isinstance(exc, ValueError | OverflowError):
            raise _refused(path, exc) from exc
        raise


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
    rows: Iterator[list[str | None]], progress: _Progress, already_read: int
) -> Iterator[list[list[str | None]]]:
    """Batches of the non-empty ``rows``; ``already_read``: the sheet's rows read before them."""
    read = already_read
    while chunk := list(itertools.islice(rows, BATCH_ROWS)):
        batch = [row for row in chunk if any(c is not None for c in row)]
        read += len(chunk)
        yield batch
        progress.count(len(batch), read)
        read = 0
