"""Writing a query result to CSV, TSV or JSON with the standard library, streaming row by row.

Qt-free on purpose: exports run on a pool thread, and these functions are tested on their own.
Cells are written by ``core.export_formats`` (the same forms "Copy as …" puts on the clipboard).
The file is written to a temporary name and renamed at the end, so a cancelled or failed export
never leaves half a file under the name the user chose.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from sqale_desktop.core.export_formats import cell_text, json_value, platform_newline

ExportFormat = Literal["csv", "tsv", "json"]


class ExportCancelled(Exception):
    """The user cancelled the export; nothing was written."""


def export_rows(
    path: Path,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    fmt: ExportFormat,
    cancel: threading.Event | None = None,
    newline: str | None = None,
) -> int:
    """Write ``rows`` to ``path``; returns the number of rows written.

    CSV and TSV: a header record, NULL as an empty field, BLOBs as SQLite hex literals, every
    record ended by ``newline`` (the platform's by default; pass ``"\\r\\n"`` for RFC 4180), cells
    holding CR or LF quoted.  JSON: an array of objects keyed by column name (duplicate names keep
    the last), BLOBs as ``{"$base64": …}``.
    """
    path = Path(path)
    end = platform_newline() if newline is None else newline
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            if fmt in ("csv", "tsv"):
                # Records are formatted with CRLF (so csv quotes cells holding CR or LF), then
                # written with the chosen line ending.
                buffer = io.StringIO()
                writer = csv.writer(buffer, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\r\n")

                def record(cells: Sequence[Any]) -> None:
                    buffer.seek(0)
                    buffer.truncate()
                    writer.writerow(cells)
                    handle.write(buffer.getvalue()[:-2] + end)

                record(columns)
                for row in rows:
                    if cancel is not None and count % 1000 == 0 and cancel.is_set():
                        raise ExportCancelled
                    record([cell_text(v) for v in row])
                    count += 1
            else:
                handle.write("[")
                for row in rows:
                    if cancel is not None and count % 1000 == 0 and cancel.is_set():
                        raise ExportCancelled
                    record_json = {name: json_value(v) for name, v in zip(columns, row, strict=False)}
                    handle.write(
                        ("\n  " if count == 0 else ",\n  ") + json.dumps(record_json, ensure_ascii=False)
                    )
                    count += 1
                handle.write("\n]\n" if count else "]\n")
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return count
