"""Many tabs: database worker processes and their memory with 17 tabs open, and the quit.

    .venv/bin/python benchmarks/tabs.py [--quick] [--tabs 17] [--repo PATH]

A fresh app process (offscreen, its own SQALE_DESKTOP_HOME) opens N databases from the command
line's path (``LaunchOpener``, what ``sqale-desktop A B C`` does), runs a statement in each tab's
SQL panel whose result is longer than the grid's first page (each grid keeps its cursor open),
scrolls every grid to its end, and then quits with Ctrl+Q.  Figures:

- ``workers_peak`` / ``workers_open``: database worker processes of the app (read in /proc,
  sampled every 50 ms while the tabs open and run, and once all are open); ``rss_mb``: their
  summed resident memory once all are open.  Issue 32 item 9: 45 workers and 1.45 GB for 17 tabs.
- ``window_gone_s``: Ctrl+Q to the window hidden (target <= 1 s); ``process_gone_s``: Ctrl+Q to
  the app's process ended (target <= 2 s); ``workers_left``: its workers still alive after that.

Median of 3 runs (--quick: 1).  ``--repo`` measures another checkout (the code before a change)
with this same script.  Prints figures, then ONE JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROWS = 1_200

CHILD = r"""
import json, os, sys, time
from pathlib import Path
from PySide6.QtCore import QTimer, Qt
from PySide6.QtTest import QTest
from sqale_desktop.ui import app as app_mod

WORKER = b"sqale_desktop.core.db.worker"

def emit(**fields):
    print(json.dumps(fields), flush=True)

def workers():
    me, pids, rss_kb = os.getpid(), [], 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = open(f"/proc/{entry}/stat", "rb").read().rsplit(b")", 1)[1].split()
            argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
            if int(fields[1]) != me or fields[0] == b"Z" or WORKER not in argv:
                continue
            for line in open(f"/proc/{entry}/status"):
                if line.startswith("VmRSS:"):
                    rss_kb += int(line.split()[1])
            pids.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return pids, rss_kb / 1024

sql = sys.argv[1]
files = [Path(p) for p in sys.argv[2:]]
app = app_mod.create_application([sys.argv[0]])
window = app_mod.build_main_window(first_run_offer=False, open_demo=False)
opener = app_mod.LaunchOpener(window, files)
peak = [0]

def sample():
    peak[0] = max(peak[0], len(workers()[0]))

sampler = QTimer()
sampler.timeout.connect(sample)
sampler.start(50)

def run_all():
    pending = list(window.pages())

    def next_tab(_model=None):
        sample()
        if not pending:
            QTimer.singleShot(0, scroll_all)
            return
        page = pending.pop(0)
        window.tabs.setCurrentWidget(page)
        page.sql.query_finished.connect(lambda _m: QTimer.singleShot(0, next_tab))
        page.sql.run(sql)

    next_tab()

def scroll_all():
    for page in window.pages():
        window.tabs.setCurrentWidget(page)
        model = page.sql.model
        while model is not None and model.canFetchMore():
            model.fetchMore()
        sample()
    QTimer.singleShot(0, measure)

def measure():
    pids, rss = workers()
    sampler.stop()
    emit(event="open", tabs=len(window.pages()), workers=len(pids), peak=max(peak[0], len(pids)),
         rss_mb=round(rss, 1), pids=pids)
    QTimer.singleShot(300, quit_now)

def quit_now():
    started = time.monotonic()
    emit(event="quit", at=started)
    QTest.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    emit(event="window_gone", at=time.monotonic(), visible=window.isVisible())

window.show()
opener.when_settled(lambda: QTimer.singleShot(0, run_all))
status = app.exec()
window.shutdown()
sys.exit(status)
"""


def make_databases(folder: Path, count: int) -> list[Path]:
    """``count`` small databases of their own (a table of ROWS rows and a few more tables)."""
    paths = []
    for i in range(count):
        path = folder / f"tab{i:02d}.sqlite"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE t (x INTEGER, tag INTEGER, label TEXT)")
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)", [(j, i, f"row {j}") for j in range(ROWS)])
        for k in range(5):
            conn.execute(f"CREATE TABLE extra{k} (id INTEGER PRIMARY KEY, v TEXT)")
        conn.commit()
        conn.close()
        paths.append(path)
    return paths


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def one_run(repo: Path, files: list[Path]) -> dict[str, float | int]:
    with tempfile.TemporaryDirectory(prefix="sqale-tabs-") as home:
        env = dict(os.environ, SQALE_DESKTOP_HOME=home, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(repo))
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, "SELECT x, tag, label FROM t ORDER BY x", *map(str, files)],
            cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        events: dict[str, dict[str, object]] = {}
        for line in proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                events[str(event["event"])] = event
        proc.wait(timeout=300)
        gone = time.monotonic()
        opened, quit_at, window = events["open"], events["quit"], events["window_gone"]
        if opened["tabs"] != len(files):
            raise RuntimeError(f"{opened['tabs']} of {len(files)} tabs opened")
        pids = opened["pids"]
        assert isinstance(pids, list)
        deadline = time.monotonic() + 5.0
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        return {
            "workers_peak": int(opened["peak"]),  # type: ignore[call-overload]
            "workers_open": int(opened["workers"]),  # type: ignore[call-overload]
            "rss_mb": float(opened["rss_mb"]),  # type: ignore[arg-type]
            "window_gone_s": round(float(window["at"]) - float(quit_at["at"]), 3),  # type: ignore[arg-type]
            "process_gone_s": round(gone - float(quit_at["at"]), 3),  # type: ignore[arg-type]
            "workers_left": sum(_alive(pid) for pid in pids),
            "exit_status": proc.returncode,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run instead of three")
    parser.add_argument("--tabs", type=int, default=17)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to measure")
    args = parser.parse_args()
    runs = 1 if args.quick else 3
    with tempfile.TemporaryDirectory(prefix="sqale-tabs-data-") as data:
        files = make_databases(Path(data), args.tabs)
        results = [one_run(args.repo.resolve(), files) for _ in range(runs)]
    figures: dict[str, object] = {"tabs": args.tabs, "runs": runs}
    for key in results[0]:
        figures[key] = statistics.median(float(r[key]) for r in results)
    for key, value in figures.items():
        print(f"{key:>16}: {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
