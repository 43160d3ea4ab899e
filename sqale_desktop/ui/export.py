"""Writing a whole query result to a CSV, TSV or JSON file, streaming row by row.

Qt-free on purpose: exports run on a pool thread, and these functions are tested on their own.
The bytes are ``core.export_formats.write_rows``'s (the same as "Copy as …" puts on the clipboard
and ``sqale-desktop query --format`` prints); this module adds only the file handling: the file is
written to a temporary name and renamed at the end, so a cancelled or failed export never leaves
half a file under the name the user chose.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from sqale_desktop.core import settings
from sqale_desktop.core.export_formats import TextLayout, write_rows

ExportFormat = Literal["csv", "tsv", "json"]

CANCEL_CHECK_ROWS = 1000
"""How often (in rows) the cancel flag is looked at."""


class ExportCancelled(Exception):
    """The user cancelled the export; nothing was written."""


def _watched(rows: Iterable[Sequence[Any]], cancel: threading.Event | None) -> Iterator[Sequence[Any]]:
    for count, row in enumerate(rows):
        if cancel is not None and count % CANCEL_CHECK_ROWS == 0 and cancel.is_set():
            raise ExportCancelled
        yield row


def export_rows(
    path: Path,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    fmt: ExportFormat,
    cancel: threading.Event | None = None,
    newline: str | None = None,
    sanitize_formulas: bool | None = None,
) -> int:
    """Write ``rows`` to ``path``; returns the number of rows written.

    CSV and TSV: a header record, every record ended by ``newline`` (the platform's by default;
    pass ``"\\r\\n"`` for RFC 4180).  JSON: an array of objects keyed by column name, one a line.
    Cells follow ``core.export_formats``' rules (NULL, BLOB ``X'01FF'``, floats exactly, strict JSON).
    ``sanitize_formulas``: ``None`` follows the saved setting (``csv_formulas``), read here so that
    every export path gets it without each caller passing it.
    """
    if sanitize_formulas is None:
        sanitize_formulas = settings.load().settings.csv_formulas == "sanitize"
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            layout = TextLayout(fmt, newline=newline, sanitize_formulas=sanitize_formulas)
            count = write_rows(handle, columns, _watched(rows, cancel), layout)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return count
