"""UI responsiveness figures: event-loop stalls while an episode streams, first rows of a huge
result, and launch time.  Prints figures, then ONE JSON object on the last line.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/ui.py [--quick] [--only-stall | --only-data]

1. Stall: a 10 ms QTimer runs while the replay engine streams an episode at full speed (no delay,
   4-character chunks) whose tool queries scan a 2-million-row table; the worst gap between two
   timer ticks, minus the 10 ms period, is the longest the UI could not react (target <= 50 ms).
2. First rows: time from "run" to the grid holding the first 500 rows of a 10-million-row result
   (target <= 150 ms), and the memory that costs (RSS and Python allocations).
3. Launch: a fresh process, from its start to the main window shown (target <= 2 s).
4. Tree filter: a generated 5,000-table database in the schema browser; each keystroke typed into
   the filter box, timed from the key to the tree repainted (target <= 50 ms per keystroke).
5. Chart: 100,000 result rows (two numeric columns) drawn in the Chart view as a line and as a
   scatter (which draws an evenly spaced 25,000-point sample), from handing over the rows to the
   plot repainted (target <= 200 ms).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from PySide6.QtCore import QElapsedTimer, QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402


def rss_bytes() -> int:
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def make_big_table(path: Path, rows: int) -> float:
    started = time.perf_counter()
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE sales (id INTEGER PRIMARY KEY, region TEXT, product INTEGER, amount REAL)")
    conn.execute(
        "INSERT INTO sales (region, product, amount) "
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT ?) "
        "SELECT 'region ' || (x % 17), x % 1009, (x * 7919) % 10007 / 100.0 FROM c",
        (rows,),
    )
    conn.commit()
    conn.close()
    return time.perf_counter() - started


def episode_script(turns: int, thinking_chars: int) -> list[str]:
    queries = [
        "SELECT region, count(*), round(avg(amount), 2) FROM sales GROUP BY region ORDER BY 2 DESC",
        "SELECT product, sum(amount) AS total FROM sales GROUP BY product ORDER BY total DESC LIMIT 5",
        "SELECT count(*) FROM sales WHERE amount > 50",
        "SELECT region, max(amount) FROM sales WHERE product % 3 = 0 GROUP BY region",
    ]
    words = "The question needs the regions with the highest sales, so I compare totals. "
    thinking = (words * (thinking_chars // len(words) + 1))[:thinking_chars]
    script = []
    for turn in range(turns - 1):
        sql = queries[turn % len(queries)]
        call = json.dumps({"tool": "run_query", "args": {"sql": sql}})
        if turn == 0:
            call = json.dumps({"tool": "describe_table", "args": {"table_name": "sales"}}) + "\n" + call
        script.append(f"{thinking}\n</think>\n\n{call}")
    final = json.dumps({"tool": "submit_sql", "args": {"sql": queries[0]}})
    script.append(f"{thinking}\n</think>\n\n{final}")
    return script


def measure_stall(app: QApplication, db_path: Path, turns: int, thinking_chars: int) -> dict[str, float]:
    from sqale_desktop.core.engines.replay import ReplayEngine
    from sqale_desktop.core.history import History
    from sqale_desktop.core.runtime import ModelChoice, resolve
    from sqale_desktop.core.settings import Settings
    from sqale_desktop.ui.main_window import MainWindow

    script = episode_script(turns, thinking_chars)
    loop = QEventLoop()
    home = Path(tempfile.mkdtemp(prefix="sqale-bench-"))
    replay = resolve(Settings(), ModelChoice("replay"))  # the window's runtime, over the script
    window = MainWindow(
        Settings(),
        dataclasses.replace(replay, factory=lambda: ReplayEngine(script, chunk_chars=4, delay=0.0)),
        history=History(home / "history.sqlite"),
    )
    window.show()
    opened: list[object] = []
    window.database_opened.connect(opened.append)
    window.open_database(db_path)
    deadline = time.monotonic() + 60
    while not opened and time.monotonic() < deadline:
        loop.processEvents()
    page = window.pages()[0]
    # Let the background row count and integrity check of the big table finish first, so that the
    # figure is about the episode (they would only add GIL-free SQLite work anyway).
    while window.pool.active_jobs() and time.monotonic() < deadline:
        loop.processEvents()

    gaps: list[float] = []
    clock = QElapsedTimer()
    timer = QTimer()
    timer.setInterval(10)

    def tick() -> None:
        gaps.append(clock.nsecsElapsed() / 1e6)
        clock.restart()

    timer.timeout.connect(tick)
    finished: list[object] = []
    window.episode_finished.connect(finished.append)
    started = time.perf_counter()
    clock.start()
    timer.start()
    window.ask(page, "Which regions sell the most?")
    while not finished and time.monotonic() < deadline + 120:
        loop.processEvents()
    # Include the answer's rerun in the grid, which the window starts when the episode ends.
    while page.sql.running and time.monotonic() < deadline + 120:
        loop.processEvents()
    seconds = time.perf_counter() - started
    timer.stop()
    episode = finished[0] if finished else None
    view = page.chat.episodes[-1]
    chars = sum(len(t.thinking.plain_text()) for t in view.turns.values())
    stalls = [max(0.0, g - 10.0) for g in gaps[1:]]
    assert window.shutdown()
    window.deleteLater()
    loop.processEvents()
    return {
        "stall_max_ms": round(max(stalls, default=0.0), 1),
        "stall_p99_ms": round(statistics.quantiles(stalls, n=100)[98], 1) if len(stalls) > 100 else 0.0,
        "ticks": len(gaps),
        "episode_seconds": round(seconds, 2),
        "streamed_chars": chars,
        "tool_cards": len(view.tool_cards()),
        "ended_by": getattr(episode, "ended_by", "none"),
        "error": getattr(episode, "error", None),
    }


def measure_first_rows(app: QApplication, db_path: Path, rows: int) -> dict[str, float]:
    from sqale_desktop.core.db.connection import open_readonly
    from sqale_desktop.ui.sql_panel import SqlPanel
    from sqale_desktop.ui.workers import TaskPool

    loop = QEventLoop()
    db = open_readonly(db_path)
    pool = TaskPool()
    panel = SqlPanel(db, pool)
    panel.resize(900, 700)
    panel.show()
    loop.processEvents()
    sql = (
        f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {rows}) "
        "SELECT x AS id, x * 2 AS twice, 'row ' || x AS label FROM c"
    )
    done: list[object] = []
    panel.query_finished.connect(done.append)
    rss_before = rss_bytes()
    started = time.perf_counter()
    panel.run(sql)
    while not done:
        loop.processEvents()
    panel.grid.viewport().repaint()  # the rows are on screen, not just in the model
    elapsed_ms = (time.perf_counter() - started) * 1000
    rss_after = rss_bytes()
    model = panel.model
    loaded = model.rowCount() if model is not None else 0
    warm = []
    for _ in range(3):
        done.clear()
        started = time.perf_counter()
        panel.run(sql)
        while not done:
            loop.processEvents()
        panel.grid.viewport().repaint()
        warm.append((time.perf_counter() - started) * 1000)
    # Python's own allocations for one more run (tracemalloc slows Python down, so not timed).
    done.clear()
    tracemalloc.start()
    panel.run(sql)
    while not done:
        loop.processEvents()
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    model = panel.model
    # Scroll to the bottom a few times: each scroll fetches one more page, not the whole result.
    for _ in range(4):
        panel.grid.scrollToBottom()
        loop.processEvents()
    after_scroll = model.rowCount() if model is not None else 0
    panel.stop()
    assert pool.shutdown()
    db.close()
    return {
        "first_500_rows_ms": round(elapsed_ms, 1),
        "first_500_rows_warm_ms": round(statistics.median(warm), 1),
        "rows_loaded": loaded,
        "rows_after_4_scrolls": after_scroll,
        "result_rows": rows,
        "first_rows_rss_mb": round((rss_after - rss_before) / 2**20, 1),
        "first_rows_python_peak_mb": round(peak / 2**20, 2),
    }


def make_many_tables(path: Path, tables: int) -> None:
    conn = sqlite3.connect(path)
    with conn:
        for i in range(tables):
            conn.execute(
                f"CREATE TABLE sensor_{i}_readings (id INTEGER PRIMARY KEY, device_{i % 211} TEXT, "
                f"reading_{i % 97} REAL, taken_at TEXT)"
            )
    conn.close()


def measure_tree_filter(app: QApplication, work: Path, tables: int) -> dict[str, float]:
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from sqale_desktop.core.db.connection import open_readonly
    from sqale_desktop.core.db.introspect import load_schema
    from sqale_desktop.ui.schema_tree import SchemaBrowser, SchemaModel

    path = work / f"tables_{tables}.sqlite"
    make_many_tables(path, tables)
    loop = QEventLoop()
    with open_readonly(path) as db:
        started = time.perf_counter()
        schema = load_schema(db)
        schema_s = time.perf_counter() - started
    started = time.perf_counter()
    model = SchemaModel()
    model.set_schema(schema)
    browser = SchemaBrowser(model)
    browser.resize(300, 800)
    browser.show()
    loop.processEvents()
    browser.tree.viewport().repaint()
    build_ms = (time.perf_counter() - started) * 1000
    keystrokes: list[float] = []
    typed = "reading_42"
    for key in [*typed, "\b" * 4, "\b" * 6]:
        started = time.perf_counter()
        for char in key:
            if char == "\b":
                QTest.keyClick(browser.filter_box, Qt.Key.Key_Backspace)
            else:
                QTest.keyClicks(browser.filter_box, char)
        loop.processEvents()
        browser.tree.viewport().repaint()
        keystrokes.append((time.perf_counter() - started) * 1000 / len(key))
    shown_after = len(browser.visible_tables())
    browser.close()
    browser.deleteLater()
    loop.processEvents()
    return {
        "tree_tables": tables,
        "tree_schema_read_s": round(schema_s, 2),
        "tree_build_ms": round(build_ms, 1),
        "tree_filter_keystroke_median_ms": round(statistics.median(keystrokes), 1),
        "tree_filter_keystroke_max_ms": round(max(keystrokes), 1),
        "tree_filter_shown_after_clear": shown_after,
    }


LAUNCH_PROBE = """
import os, sys, time
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, sys.argv[1])
from sqale_desktop.ui.app import build_main_window, create_application
from PySide6.QtCore import QEventLoop
app = create_application([])
loop = QEventLoop()
window = build_main_window(first_run_offer=False)
window.show()
loop.processEvents()
shown = time.time()
opened = []
window.database_opened.connect(opened.append)
while not opened and time.time() - shown < 30:
    loop.processEvents()
print(f"{shown} {time.time()}")
window.shutdown()
"""


def measure_launch(repeats: int) -> dict[str, float]:
    shown, demo = [], []
    for _ in range(repeats):
        home = tempfile.mkdtemp(prefix="sqale-launch-")
        env = dict(os.environ, SQALE_DESKTOP_HOME=home, QT_QPA_PLATFORM="offscreen")
        started = time.time()
        out = subprocess.run(
            [sys.executable, "-c", LAUNCH_PROBE, str(REPO)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        shown.append(float(out[-2]) - started)
        demo.append(float(out[-1]) - started)
    return {
        "launch_to_window_s": round(statistics.median(shown), 3),
        "launch_to_demo_open_s": round(statistics.median(demo), 3),
        "launch_runs": repeats,
    }


def measure_chart(app: QApplication, points: int, repeats: int) -> dict[str, float]:
    import random

    from sqale_desktop.ui.chart_view import ChartView

    loop = QEventLoop()
    rng = random.Random(13)
    rows = [[i, rng.random() * i] for i in range(points)]
    view = ChartView()
    view.resize(1000, 600)
    view.show()
    loop.processEvents()
    figures: dict[str, float] = {"chart_points": points}
    for kind in ("line", "scatter"):
        times = []
        for _ in range(repeats):
            view.set_data([], [], True)
            loop.processEvents()
            started = time.perf_counter()
            view.set_data(["x", "y"], rows, True, kind)  # type: ignore[arg-type]
            view.plot.viewport().repaint()
            times.append((time.perf_counter() - started) * 1000)
        figures[f"chart_{kind}_100k_ms"] = round(statistics.median(times), 1)
    view.close()
    view.deleteLater()
    loop.processEvents()
    return figures


def measure_data_views(app: QApplication, work: Path, quick: bool) -> dict[str, float]:
    tree = measure_tree_filter(app, work, 5000)
    print(
        f"schema tree, {tree['tree_tables']:,} tables: filter keystroke to repaint median "
        f"{tree['tree_filter_keystroke_median_ms']} ms, worst {tree['tree_filter_keystroke_max_ms']} ms "
        f"(target <= 50 ms); tree built in {tree['tree_build_ms']} ms, schema read in "
        f"{tree['tree_schema_read_s']} s"
    )
    chart = measure_chart(app, 100_000, 2 if quick else 5)
    print(
        f"chart of {chart['chart_points']:,} points: line {chart['chart_line_100k_ms']} ms, scatter "
        f"{chart['chart_scatter_100k_ms']} ms, rows handed over to plot repainted (target <= 200 ms)"
    )
    return {**tree, **chart}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns and runs (under a minute)")
    parser.add_argument("--skip-launch", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--skip-first-rows", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--only-data", action="store_true", help="only the schema tree and chart figures")
    parser.add_argument("--only-stall", action="store_true", help="only the stall while an episode streams")
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    assert isinstance(app, QApplication)
    work = Path(tempfile.mkdtemp(prefix="sqale-ui-bench-"))
    data = {} if args.only_stall else measure_data_views(app, work, args.quick)
    if args.only_data:
        print(json.dumps({"benchmark": "ui", "quick": args.quick, **data}))
        return 0
    big = work / "big.sqlite"
    build_s = make_big_table(big, 2_000_000)
    print(f"built a 2,000,000-row table in {build_s:.1f} s")

    stall = measure_stall(app, big, turns=4 if args.quick else 7, thinking_chars=4000 if args.quick else 6000)
    print(
        f"stall while streaming: worst {stall['stall_max_ms']} ms, p99 {stall['stall_p99_ms']} ms "
        f"over {stall['ticks']} ticks; episode {stall['episode_seconds']} s, "
        f"{stall['streamed_chars']:,} characters streamed, {stall['tool_cards']} tool cards, "
        f"ended by {stall['ended_by']} (target <= 50 ms)"
    )
    if args.skip_first_rows or args.only_stall:
        print(json.dumps(stall))
        return 0
    first = measure_first_rows(app, big, 10_000_000)
    print(
        f"first 500 rows of a {first['result_rows']:,}-row result: {first['first_500_rows_ms']} ms "
        f"(target <= 150 ms; warm {first['first_500_rows_warm_ms']} ms); "
        f"RSS +{first['first_rows_rss_mb']} MB, Python peak "
        f"{first['first_rows_python_peak_mb']} MB; {first['rows_after_4_scrolls']} rows after 4 scrolls"
    )
    launch = measure_launch(1 if args.quick else 3)
    print(
        f"launch to shown window: {launch['launch_to_window_s']} s (target <= 2 s); "
        f"demo database open at {launch['launch_to_demo_open_s']} s"
    )
    figures = {"benchmark": "ui", "quick": args.quick, **stall, **first, **launch, **data}
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
