"""How fast data files become databases (issue 24): MB/s and rows/s, and the time to first rows.

Generates, in a temporary folder: a CSV of typed columns (integers, reals, ISO dates, booleans, ZIP
codes with leading zeros, text) of 1 GB (``--quick``: 32 MB), the same in cp1252 (with accents) of
256 MB (``--quick``: 8 MB), a 100,000-row .xlsx (``--quick``:
10,000), and a Parquet file of 1,000,000 rows (``--quick``: 100,000).  Each is imported into a
fresh cache (a fresh ``SQALE_DESKTOP_HOME``), then opened read-only and its first 100 rows read:
that is the time to the first browsable rows once imported.  The window shows a CSV's first rows
before that, while it imports (``core/imports/preview.py``): ``csv_preview_s`` is the time to read
them (the tab shows them at most 250 ms later, ``ui/database_tabs.py``).
A second open of the CSV shows the cost of reusing the import (the content hash).

The CSV takes the fast path (``core/imports/fast_text.py``: pyarrow parses, ADBC writes), the
Parquet file too (``fast_typed.py``).  On the 2-core zen4 machine, alone, three runs of the 1 GB
CSV (17.3 M rows): 17.9 s, 12.6 s and 19.4 s, **59.9, 85.0 and 55.4 MB/s** (32, 44 and 29 MB per
CPU-second: the machine's own speed varied that much); the general path, ``text.py`` into
``builder.py``, makes about 7 MB/s.  The 1,000,000-row Parquet file: 2.1–2.8 s (360,000–483,000
rows/s; 174,000 before the fast path); the 100,000-row .xlsx: 0.9–1.5 s (66,000–108,000 rows/s).

What the figures include: each import runs in a child (``core/imports/isolated.py``) forked from the
importers' fork server (``core/child/forks.py``). The first import of the run (the CSV) starts that
server, as the first import of the command line or of a file named at the window's launch does
(``import_source`` starts it at its entry, beside its own checks): its figure includes the server's
interpreter start and, in its child, the import of Arrow, ADBC and the readers (in the app's own
process, before the importers moved into children, the first import paid those imports too, and
pandas, which pyarrow imported where it is installed; the importer hides it). Measure with the
package's bytecode compiled (``python -m compileall sqale_desktop``), as an installed app has it:
where ``PYTHONDONTWRITEBYTECODE`` is set and nothing is compiled, every process compiles the modules
it imports, and each child process pays that again. The window starts the server when a person
chooses Open… or drags a file over it (``isolated.start_ahead``), so a first import chosen there
pays that start only in so far as the choice took less than the warm-up (about a second): the
``csv`` figure is the worst case. Each later import starts once the server finished loading the
readers' libraries and forked the next child ahead (``core.child.wait_warm``: a second or two after
the first import, idle), as when a person opens the next file after a pause, and is served by that
child; its figures hold neither that warm-up's time nor its CPU (the serving child's CPU from its
fork on counts in its import; the server's fork of it falls between two imports). ``*_mb_per_cpu_s``
and ``*_cpu_s`` count this process's CPU and the children's (the server's, its imports included, and
the forked children's, each counted once it is reaped).

Prints one line per figure, then ONE JSON object on the last line.  ``--csv-only``: the CSV's
figures alone (the 1 GB target without the other files' minutes).

    .venv/bin/python benchmarks/import.py [--quick] [--csv-only]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))


def make_csv(path: Path, target_bytes: int, encoding: str = "utf-8") -> int:
    """A CSV of about ``target_bytes``; returns its number of data rows.  In another ``encoding``
    than UTF-8 the customers' names have an accent, so the file is not ASCII."""
    rows = 0
    customer = "customer" if encoding == "utf-8" else "caf\u00e9"
    with open(path, "w", encoding=encoding, newline="") as handle:
        handle.write("id,customer,amount,day,paid,zip,note\n")
        written = 0
        block = []
        while written < target_bytes:
            block.clear()
            for i in range(rows, rows + 10_000):
                block.append(
                    f"{i},{customer} {i % 5000},{(i * 37) % 100000 / 100},"
                    f"2024-{i % 12 + 1:02d}-{i % 28 + 1:02d},"
                    f'{"true" if i % 3 else "false"},0{i % 9999:04d},"note, {i % 97}"\n'
                )
            text = "".join(block)
            handle.write(text)
            written += len(text)
            rows += 10_000
    return rows


def make_xlsx(path: Path, rows: int) -> None:
    """A minimal valid .xlsx (inline strings), written by hand: no writer library is a dependency."""
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    lines = [f'<?xml version="1.0" encoding="UTF-8"?><worksheet {ns}><sheetData>']
    lines.append(
        '<row r="1"><c r="A1" t="inlineStr"><is><t>id</t></is></c><c r="B1" t="inlineStr"><is><t>name'
        '</t></is></c><c r="C1" t="inlineStr"><is><t>amount</t></is></c></row>'
    )
    for i in range(2, rows + 2):
        lines.append(
            f'<row r="{i}"><c r="A{i}"><v>{i}</v></c><c r="B{i}" t="inlineStr"><is><t>name {i % 777}'
            f'</t></is></c><c r="C{i}"><v>{i * 1.25}</v></c></row>'
        )
    lines.append("</sheetData></worksheet>")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.'
            'openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="applic'
            'ation/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="a'
            'pplication/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlf'
            'ormats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/shee'
            't1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+x'
            'ml"/></Types>',
        )
        z.writestr(
            "_rels/.rels",
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.op'
            'enxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="'
            + rel
            + '/officeDocument" Target="xl/workbook.xml"/></Relationships>',
        )
        z.writestr(
            "xl/workbook.xml",
            f'<?xml version="1.0" encoding="UTF-8"?><workbook {ns} xmlns:r="{rel}">'
            '<sheets><sheet name="data" sheetId="1" r:id="rId1"/></sheets></workbook>',
        )
        z.writestr(
            "xl/_rels/workbook.xml.rels",
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="h'
            'ttp://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="'
            + rel
            + '/worksheet" Target="worksheets/sheet1.xml"/></Relationships>',
        )
        z.writestr("xl/worksheets/sheet1.xml", "".join(lines))


def make_parquet(path: Path, rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = pa.array(range(rows), pa.int64())
    pq.write_table(
        pa.table(
            {
                "id": ids,
                "amount": pa.array([i * 0.5 for i in range(rows)], pa.float64()),
                "name": pa.array([f"name {i % 1000}" for i in range(rows)]),
                "at": pa.array([i * 1_000_000 for i in range(rows)], pa.timestamp("us")),
            }
        ),
        path,
    )


def cpu_s() -> float:
    """CPU seconds of this process and of its children so far: every import runs in a child
    (``core.imports.isolated``), forked from a warm importer whose own imports count once."""
    from sqale_desktop.core.child import children_cpu_s

    return time.process_time() + children_cpu_s()


def measure(path: Path, rows: int, label: str, first: bool = False) -> dict[str, Any]:
    """Import ``path`` and read its first rows.  Every import but the ``first`` starts once the
    importers' server finished its warm-up (as after a person's pause between two files)."""
    from sqale_desktop.core.child import wait_warm
    from sqale_desktop.core.db import open_readonly
    from sqale_desktop.core.imports import import_source, isolated

    if not first and not wait_warm(isolated.MODULE, timeout=120.0):
        print(f"{label}: the importers' server was not warm (none, or its warm-up took > 120 s)")
    size = path.stat().st_size
    start = time.perf_counter()
    cpu_start = cpu_s()
    result = import_source(path)
    imported = time.perf_counter() - start
    cpu = cpu_s() - cpu_start
    with open_readonly(result.db_path) as db:
        table = result.tables[0].name
        db.execute(f'SELECT * FROM "{table}"', max_rows=100)
    first_rows = time.perf_counter() - start
    from sqale_desktop.core.imports import arrow_writer

    with contextlib.closing(sqlite3.connect(f"file:{result.db_path}?mode=ro", uri=True)) as conn:
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    assert result.tables[0].rows == rows, (result.tables[0].rows, rows)
    figures = {
        f"{label}_bytes": size,
        f"{label}_rows": rows,
        f"{label}_import_s": round(imported, 3),
        f"{label}_mb_per_s": round(size / 1e6 / imported, 1),
        # per second of CPU this process and its children got (the importer is a child): on a
        # shared machine the wall-clock figure mostly measures the other processes
        f"{label}_mb_per_cpu_s": round(size / 1e6 / cpu, 1),
        f"{label}_cpu_s": round(cpu, 3),
        f"{label}_rows_per_s": round(rows / imported),
        f"{label}_first_rows_s": round(first_rows, 3),
        # the fast paths write with their own page size: which path imported the file
        f"{label}_fast_path": page_size == arrow_writer.PAGE_SIZE,
    }
    for key, value in figures.items():
        print(f"{key}: {value}")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small files (seconds, not minutes)")
    parser.add_argument("--csv-only", action="store_true", help="the CSV's figures alone")
    args = parser.parse_args()
    from sqale_desktop.core.db.process import POOL

    # No database worker (the first rows are read through one) ends within a measure: an ended
    # child's CPU counts in RUSAGE_CHILDREN, which would add it to the import's.
    POOL.idle_s = 3600.0
    with tempfile.TemporaryDirectory(prefix="sqale-import-bench-") as tmp:
        folder = Path(tmp)
        os.environ["SQALE_DESKTOP_HOME"] = str(folder / "home")
        out: dict[str, Any] = {"quick": args.quick}
        csv_path = folder / "sales.csv"
        rows = make_csv(csv_path, (32 if args.quick else 1024) * 1024 * 1024)
        from sqale_desktop.core.imports.preview import preview_source

        start = time.perf_counter()
        shown = preview_source(csv_path)
        out["csv_preview_s"] = round(time.perf_counter() - start, 3)
        assert shown is not None and shown.rows
        print(f"csv_preview_s: {out['csv_preview_s']} ({len(shown.rows)} rows)")
        out.update(measure(csv_path, rows, "csv", first=True))
        from sqale_desktop.core.imports import import_source

        start = time.perf_counter()
        assert import_source(csv_path).reused
        out["csv_reuse_s"] = round(time.perf_counter() - start, 3)
        print(f"csv_reuse_s: {out['csv_reuse_s']}")
        if args.csv_only:
            print(json.dumps(out))
            return 0
        # A Windows spreadsheet export: imported through a UTF-8 copy (fast_text._write_transcoded)
        cp1252_path = folder / "export.csv"
        cp1252_rows = make_csv(cp1252_path, (8 if args.quick else 256) * 1024 * 1024, "cp1252")
        out.update(measure(cp1252_path, cp1252_rows, "csv_cp1252"))
        xlsx_rows = 10_000 if args.quick else 100_000
        make_xlsx(folder / "book.xlsx", xlsx_rows)
        out.update(measure(folder / "book.xlsx", xlsx_rows, "xlsx"))
        parquet_rows = 100_000 if args.quick else 1_000_000
        make_parquet(folder / "table.parquet", parquet_rows)
        out.update(measure(folder / "table.parquet", parquet_rows, "parquet"))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
