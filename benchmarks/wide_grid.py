"""Wide results: Run to the grid shown for 1,000 columns x 50 rows, and the figure the panel reports.

    .venv/bin/python benchmarks/wide_grid.py [--quick] [--columns 1000] [--rows 50]

Issue 32 item 10: a 1,093-column result said "54 rows · 47 ms", then the grid took 4 s more to
appear.  Offscreen, in this process: a shown SQL panel over a fresh database with one table of
that shape runs ``SELECT *`` (the Run path: the pool's job, the first page, the grid's model and
its column sizing), and the clock stops once the grid has painted its viewport.

Figures (median of 5 runs, --quick: 3): ``grid_shown_ms`` (target <= 500 ms), ``fit_ms`` (the
column sizing alone, measured apart), ``reported_ms`` (what the panel's message says: it must
be close to ``grid_shown_ms``, not to the statement's time).  Prints figures, then ONE JSON
object on the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def make_wide(path: Path, columns: int, rows: int) -> None:
    conn = sqlite3.connect(path)
    names = [f"column_{c:04d}_{'long_name' if c % 7 == 0 else 'v'}" for c in range(columns)]
    conn.execute(f"CREATE TABLE wide ({', '.join(names)})")
    values = [
        tuple((r * c if c % 3 else f"text {r}-{c}" * (1 + c % 4)) if c % 11 else None for c in range(columns))
        for r in range(rows)
    ]
    conn.executemany(f"INSERT INTO wide VALUES ({', '.join('?' * columns)})", values)
    conn.commit()
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 runs instead of 5")
    parser.add_argument("--columns", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("SQALE_DESKTOP_HOME", tempfile.mkdtemp(prefix="sqale-wide-home-"))

    from PySide6.QtWidgets import QApplication

    from sqale_desktop.core.db import open_readonly
    from sqale_desktop.ui.sql_panel import SqlPanel
    from sqale_desktop.ui.workers import TaskPool

    app = QApplication.instance() or QApplication([])
    runs = 3 if args.quick else 5
    shown: list[float] = []
    reported: list[float] = []
    fits: list[float] = []
    with tempfile.TemporaryDirectory(prefix="sqale-wide-") as folder:
        path = Path(folder) / "wide.sqlite"
        make_wide(path, args.columns, args.rows)
        db = open_readonly(path)
        pool = TaskPool(max_threads=2)
        panel = SqlPanel(db, pool)
        panel.resize(1200, 800)
        panel.show()
        app.processEvents()
        for _ in range(runs):
            done: list[float] = []
            panel.query_finished.connect(lambda _m, done=done: done.append(time.perf_counter()))
            started = time.perf_counter()
            panel.run("SELECT * FROM wide")
            deadline = time.monotonic() + 120
            while not done and time.monotonic() < deadline:
                app.processEvents()
                time.sleep(0.001)
            panel.grid.viewport().repaint()  # the grid on screen, not only laid out
            shown.append((time.perf_counter() - started) * 1000)
            panel.query_finished.disconnect()
            figure = re.search(r"· (\d+) ms", panel.message.text())
            reported.append(float(figure.group(1)) if figure else float("nan"))
            began = time.perf_counter()
            panel.grid.fit_columns()
            fits.append((time.perf_counter() - began) * 1000)
        panel.release()
        pool.shutdown()
        db.close()
    figures = {
        "columns": args.columns,
        "rows": args.rows,
        "runs": runs,
        "grid_shown_ms": round(statistics.median(shown), 1),
        "fit_ms": round(statistics.median(fits), 1),
        "reported_ms": statistics.median(reported),
    }
    for key, value in figures.items():
        print(f"{key:>14}: {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
