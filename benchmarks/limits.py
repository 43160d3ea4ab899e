"""How the limits hold against the bombs of issues 16 and 21: time past the limit, memory, Stop.

For each bomb (a printf width bomb, rows of zeroblob, giant SQL text, slow tool calls in one
turn, and issue 21's single long C calls: printf with a width given as text, LIKE, GLOB,
replace, ltrim, trim of huge arguments) a fresh child process (the "app") runs it at a 1 s limit
and reports the seconds past the limit until control came back (target: at most 1.5 s), the
peak RSS of the app above its baseline after opening the database (target: at most 512 MB) and
the peak RSS of its database workers, and whether the app survived; then a second run with a
60 s limit is stopped from another thread after 0.3 s and the time from Stop to idle is reported
(target: at most 1.5 s).  Last, 4 processes import models into one registry at once: writes per
second, and whether every entry survived.

Prints one line per figure, then ONE JSON object on the last line.

    .venv/bin/python benchmarks/limits.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LIMIT_S = 1.0
STOP_AFTER_S = 0.3
REPO_ROOT = Path(__file__).resolve().parents[1]

ROWS_1000 = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 1000)"
ROWS_FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c)"
# Each bomb: the statement run at the 1 s limit, and the one stopped from another thread (the
# first may be refused before it can be stopped, so the Stop run uses a variant that does run).
BOMBS: dict[str, tuple[str, str]] = {
    "printf_width": (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 5) "
        "SELECT count(printf('%.*c', 2147483647-x, 'x')) FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
        "SELECT count(printf('%.*c', 100000, 'x')) FROM c",
    ),
    "printf_width_in_view": ("SELECT * FROM printf_bomb", ""),
    "zeroblob_rows": (
        f"{ROWS_1000} SELECT zeroblob(200000000) FROM c",
        f"{ROWS_FOREVER} SELECT count(zeroblob(60000000)) FROM c",
    ),
    "zeroblob_rows_kept": (f"{ROWS_1000} SELECT zeroblob(60000000) FROM c", ""),
    "giant_sql_whitespace": (" " * 50_000_000 + "SELECT 1", ""),
    "giant_sql_literal": ("SELECT '" + "x" * 50_000_000 + "'", ""),
}


def _repeat(char: str, count: int) -> str:
    """SQL for ``count`` copies of ``char``, built in linear time."""
    return f"replace(hex(zeroblob({count // 2})), '0', '{char}')"


# Issue 21: each runs for tens of seconds to minutes inside one SQLite C call, where neither the
# progress handler nor sqlite3_interrupt reaches; only killing the database worker stops it.
C_CALL_BOMBS = {
    "printf_width_as_text": (
        "WITH w(n) AS (SELECT printf('%70s%d', '', 2147483647)) "
        "SELECT length(printf('%.*c%.*c%.*c', n, 'x', n, 'y', n, 'z')) FROM w"
    ),
    "like_66mb": f"SELECT {_repeat('a', 66_000_000)} LIKE '%' || {_repeat('a', 996)} || 'b%'",
    "like_4mb": f"SELECT {_repeat('a', 4_000_000)} LIKE '%' || {_repeat('a', 996)} || 'b%'",
    "glob_4mb": f"SELECT {_repeat('a', 4_000_000)} GLOB '*' || {_repeat('a', 996)} || 'b*'",
    "replace_2mb": (
        f"SELECT length(replace({_repeat('a', 2_000_000)}, {_repeat('a', 1_000_000)} || 'b', 'c'))"
    ),
    "ltrim_200k": f"SELECT length(ltrim({_repeat('a', 200_000)}, {_repeat('b', 20_000)} || 'a'))",
    "trim_1m": f"SELECT length(trim({_repeat('a', 1_000_000)}, {_repeat('b', 100_000)} || 'a'))",
}
BOMBS.update({name: (sql, sql) for name, sql in C_CALL_BOMBS.items()})
SLOW = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def make_database(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.execute(f"CREATE VIEW printf_bomb AS {BOMBS['printf_width'][0]}")
    conn.commit()
    conn.close()


def _rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    peak = resource.getrusage(who).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / (1024 * 1024)


def _worker_peak_mb(db: Any) -> float:
    """The peak RSS of the database workers this process used: the ended ones (reaped children)
    and the ones still running (their VmHWM)."""
    peak = _rss_mb(resource.RUSAGE_CHILDREN)
    for link in db._links.current():
        with contextlib.suppress(OSError, ValueError, AttributeError):  # AttributeError: no workers
            for line in Path(f"/proc/{link.worker.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) / 1024)
    return peak


def _stop_after(db: Any, work: Callable[[], object], stop: Callable[[], None]) -> float:
    """Run ``work`` on a thread, call ``stop`` after STOP_AFTER_S; seconds from stop to its end."""
    done = threading.Event()

    def run() -> None:
        with contextlib.suppress(Exception):  # the stop's own error (cancelled, timed out)
            work()
        done.set()

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(STOP_AFTER_S)
    if done.is_set():
        thread.join()
        raise RuntimeError("the statement ended before it could be stopped: not a Stop measurement")
    asked = time.perf_counter()
    stop()
    thread.join()
    return time.perf_counter() - asked


def child(name: str, folder: Path) -> dict[str, Any]:
    """Run one bomb in this (fresh) process and report its figures."""
    from sqale_desktop.core.db import DatabaseError, open_readonly

    path = folder / "bombs.sqlite"
    if name == "slow_calls_in_one_turn":
        return _slow_turn(path)
    sql, stop_sql = BOMBS[name]
    with open_readonly(path, time_limit_s=LIMIT_S) as db:
        db.execute("SELECT 1")
        baseline = _rss_mb()
        started = time.perf_counter()
        try:
            db.execute(sql)
            outcome = "finished"
        except DatabaseError as exc:
            outcome = f"{type(exc).__name__}: {str(exc)[:120]}"
        seconds = time.perf_counter() - started
        peak = _rss_mb() - baseline
        worker_peak = _worker_peak_mb(db)
        stop_s: float | None = None
        if stop_sql:
            db.time_limit_s = 60
            stop_s = _stop_after(db, lambda: db.execute(stop_sql), db.interrupt)
        alive = db.execute("SELECT 1").rows == [(1,)]  # the app, and a worker, answer afterwards
    return {
        "stop_s": round(seconds, 3),
        "past_limit_s": round(seconds - LIMIT_S, 3),
        "peak_rss_above_baseline_mb": round(peak, 1),
        "worker_peak_rss_mb": round(worker_peak, 1),
        "outcome": outcome,
        "stop_to_idle_s": None if stop_s is None else round(stop_s, 4),
        "app_alive": alive,
    }


def _slow_turn(path: Path) -> dict[str, Any]:
    from sqale_desktop.core.agent.events import EpisodeEnded, ToolResulted
    from sqale_desktop.core.agent.loop import EpisodeControl, run_episode
    from sqale_desktop.core.db import open_readonly
    from sqale_desktop.core.engines.replay import ReplayEngine
    from sqale_desktop.core.tools import ToolBox

    call = json.dumps({"tool": "run_query", "args": {"sql": SLOW}})
    submit = json.dumps({"tool": "submit_sql", "args": {"sql": "SELECT 1"}})
    script = ["Slow.\n</think>\n\n" + "\n".join([call] * 6), "Done.\n</think>\n\n" + submit]
    with open_readonly(path, time_limit_s=10) as db:
        baseline = _rss_mb()
        started = time.perf_counter()
        tools_done = started
        for event in run_episode("q", db, ToolBox(db), ReplayEngine(script), turn_tool_seconds=LIMIT_S):
            if isinstance(event, ToolResulted) and event.index == 5:
                tools_done = time.perf_counter()
            if isinstance(event, EpisodeEnded):
                outcome = f"ended_by {event.episode.ended_by}"
        seconds = tools_done - started
        peak = _rss_mb() - baseline
        control = EpisodeControl()
        stop_s = _stop_after(
            db,
            lambda: list(run_episode("q", db, ToolBox(db), ReplayEngine(script), cancel=control.event)),
            control.cancel,
        )
        worker_peak = _worker_peak_mb(db)
        alive = db.execute("SELECT 1").rows == [(1,)]
    return {
        "stop_s": round(seconds, 3),
        "past_limit_s": round(seconds - LIMIT_S, 3),
        "peak_rss_above_baseline_mb": round(peak, 1),
        "worker_peak_rss_mb": round(worker_peak, 1),
        "outcome": outcome,
        "stop_to_idle_s": round(stop_s, 4),
        "app_alive": alive,
    }


WRITER = r"""
import sys
from pathlib import Path
from sqale_desktop.core.models.registry import Registry
registry_file, folder, worker, count = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
sys.stdin.readline()
for i in range(count):
    path = folder / f"w{worker}-{i}.gguf"
    path.write_bytes(b"GGUF" + f"{worker}-{i}".encode() * 10)
    Registry(registry_file).import_file(path)
"""


def registry_writes(folder: Path, per_process: int, processes: int = 4) -> dict[str, Any]:
    from sqale_desktop.core.models.registry import Registry

    registry_file = folder / "registry" / "models.json"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(registry_file), str(folder), str(n), str(per_process)],
            stdin=subprocess.PIPE,
            env=env,
            text=True,
        )
        for n in range(processes)
    ]
    time.sleep(1.0)  # let every interpreter start before the clock does
    started = time.perf_counter()
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    codes = [worker.wait(timeout=600) for worker in workers]
    seconds = time.perf_counter() - started
    kept = len(Registry(registry_file).list())
    total = processes * per_process
    return {
        "processes": processes,
        "writes": total,
        "writes_per_s": round(total / seconds, 1),
        "entries_lost": total - kept,
        "exit_codes": codes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer registry writes")
    parser.add_argument("--bombs", help="comma-separated bomb names (default: all)")
    parser.add_argument("--child-timeout", type=float, default=600.0, help="seconds one bomb's app may run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, Path(args.folder))))
        return 0
    figures: dict[str, Any] = {"limit_s": LIMIT_S, "stop_after_s": STOP_AFTER_S, "quick": args.quick}
    bombs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="sqale-limits-") as name:
        folder = Path(name)
        make_database(folder / "bombs.sqlite")
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        chosen = args.bombs.split(",") if args.bombs else [*BOMBS, "slow_calls_in_one_turn"]
        for bomb in chosen:
            try:
                done = subprocess.run(
                    [sys.executable, __file__, "--child", bomb, "--folder", str(folder)],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=args.child_timeout,
                )
            except subprocess.TimeoutExpired:
                bombs[bomb] = {"error": f"still running after {args.child_timeout:g} s", "app_alive": True}
                print(f"{bomb}: still running after {args.child_timeout:g} s (killed)")
                continue
            if done.returncode != 0:  # the app died (a crash in SQLite used to take it down)
                bombs[bomb] = {
                    "error": done.stderr.strip().splitlines()[-1:],
                    "app_alive": False,
                    "exit_status": done.returncode,
                }
                print(f"{bomb}: the child failed: {done.stderr.strip()[-500:]}")
                continue
            result = json.loads(done.stdout.strip().splitlines()[-1])
            result["within_targets"] = (
                result["past_limit_s"] <= 1.5
                and result["peak_rss_above_baseline_mb"] <= 512
                and (result["stop_to_idle_s"] is None or result["stop_to_idle_s"] <= 1.5)
                and result["app_alive"]
            )
            bombs[bomb] = result
            peak = result["peak_rss_above_baseline_mb"]
            print(
                f"{bomb:24s} past limit {result['past_limit_s']:7.3f} s  app +{peak:7.1f} MB"
                f"  worker {result['worker_peak_rss_mb']:7.1f} MB  Stop->idle {result['stop_to_idle_s']}"
                f"  alive {result['app_alive']}  ({result['outcome']})"
            )
        figures["bombs"] = bombs
        registry = registry_writes(folder, 25 if args.quick else 100)
    figures["registry"] = registry
    print(
        f"registry: {registry['writes']} writes by {registry['processes']} processes, "
        f"{registry['writes_per_s']} writes/s, {registry['entries_lost']} entries lost"
    )
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
