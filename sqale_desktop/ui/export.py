"""Writing a query result to CSV or JSON with the standard library, streaming row by row.

Qt-free on purpose: exports run on a pool thread, and these functions are tested on their own.
The file is written to a temporary name and renamed at the end, so a cancelled or failed export
never leaves half a file under the name the user chose.
"""

from __future__ import annotations

import base64
import csv
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

ExportFormat = Literal["csv", "json"]


class ExportCancelled(Exception):
    """The user cancelled the export; nothing was written."""


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray | memoryview):
        return "X'" + bytes(value).hex().upper() + "'"
    return value


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$base64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def export_rows(
    path: Path,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    fmt: ExportFormat,
    cancel: threading.Event | None = None,
) -> int:
    """Write ``rows`` to ``path``; returns the number of rows written.

    CSV: a header row, NULL as an empty field, BLOBs as SQLite hex literals.  JSON: an array of
    objects keyed by column name (duplicate names keep the last), BLOBs as ``{"$base64": …}``.
    """
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            if fmt == "csv":
                writer = csv.writer(handle)
                writer.writerow(columns)
                for row in rows:
                    if cancel is not None and count % 1000 == 0 and cancel.is_set():
                        raise ExportCancelled
                    writer.writerow([_csv_value(v) for v in row])
                    count += 1
            else:
                handle.write("[")
                for row in rows:
                    if cancel is not None and count % 1000 == 0 and cancel.is_set():
                        raise ExportCancelled
                    record = {name: _json_value(v) for name, v in zip(columns, row, strict=False)}
                    handle.write(("\n  " if count == 0 else ",\n  ") + json.dumps(record, ensure_ascii=False))
                    count += 1
                handle.write("\n]\n" if count else "]\n")
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return count
