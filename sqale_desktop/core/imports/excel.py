"""Excel (.xlsx, .xlsm) and OpenDocument (.ods) workbooks: one table per worksheet.

``python-calamine`` (Rust's calamine) reads both formats, several times faster than openpyxl and
without holding styles in memory; it applies the 1904 date system, returns the cached values of
formulas, and names hidden sheets.  Cells are turned into text and go through the same type guess
as a CSV's, so a sheet of whole numbers is INTEGER (Excel stores every number as a float), dates
are ISO-8601 text and ``TRUE`` cells are BOOLEAN.  Merged ranges hold their value in the first cell
only, as Excel itself stores them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqale_desktop.core.imports.progress import ImportFailed, Meter
from sqale_desktop.core.imports.text import BATCH_ROWS, TextTable, split_header

_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


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
    tables: list[TextTable] = []
    skipped: list[str] = []
    size = path.stat().st_size
    for meta in book.sheets_metadata:
        if meta.typ not in (SheetTypeEnum.WorkSheet,):
            skipped.append(f"{meta.name} (a {str(meta.typ).split('.')[-1]} sheet)")
            continue
        try:
            rows = book.get_sheet_by_name(meta.name).to_python(skip_empty_area=True)
        except (CalamineError, ValueError) as exc:
            skipped.append(f"{meta.name} ({exc})")
            continue
        cells = [[_cell(v) for v in row] for row in rows]
        above, header, data = split_header([[c or "" for c in row] for row in cells[:20]])
        if header is None:
            skipped.append(f"{meta.name} (empty)")
            continue
        start = len(above) + 1
        name = f"{prefix}_{meta.name}" if prefix else meta.name
        table = TextTable(name, list(header), _batches(cells[start:], meter, size))
        if above:
            table.notes.append(f"{len(above)} row(s) above the header skipped")
        if meta.visible != SheetVisibleEnum.Visible:
            table.notes.append(f"sheet {meta.name} is hidden in the workbook")
        del data
        tables.append(table)
    if not tables:
        raise ImportFailed(f"{path.name} has no worksheet with cells to import.")
    if skipped:
        tables[0].notes.append("sheets not imported: " + ", ".join(skipped))
    return tables


def _batches(rows: list[list[str | None]], meter: Meter, size: int) -> Iterator[list[list[str | None]]]:
    for start in range(0, len(rows), BATCH_ROWS):
        batch = [row for row in rows[start : start + BATCH_ROWS] if any(c is not None for c in row)]
        yield batch
        meter.count(len(batch), size if start + BATCH_ROWS >= len(rows) else 0)
