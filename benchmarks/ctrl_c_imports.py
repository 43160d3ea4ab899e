"""Ctrl+C at a random moment of a large CSV import, many times: how often the process crashes.

Each run is a child ``python`` that imports a generated 60 MB CSV with ``import_source`` (the fast
path: Arrow's reader and the ADBC writer in threads) and exits 130 on KeyboardInterrupt; a SIGINT
comes at a random moment of the first 2.5 s, as from a terminal.  The import is called directly,
not through ``resolve_database(ctrl_c_stops=True)`` (the command line's way, where Ctrl+C sets the
import's Stop), so the KeyboardInterrupt lands wherever the main thread is.

Before ``core/imports/threads.py`` the import waited for its threads with ``Thread.join``, which a
KeyboardInterrupt can mark as ended while the thread still runs (python/cpython#90882).  On the
2-core machine: a thread still running after the KeyboardInterrupt in 8 of 40 runs, and 1 crash
("Fatal Python error: PyGILState_Release ... finalizing") in another 30.  With it: 0 and 0 in 40.

Prints one line per outcome, then ONE JSON object on the last line (``crashes`` is the figure).

    .venv/bin/python benchmarks/ctrl_c_imports.py [--quick | --runs N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent(
    """
    import sys, threading
    from pathlib import Path
    from sqale_desktop.core.imports import import_source
    print("ready", flush=True)
    try:
        import_source(Path(sys.argv[1]))
    except KeyboardInterrupt:
        left = [t.name for t in threading.enumerate() if t.name.startswith("import-")]
        print("left running: " + ",".join(left), flush=True)
        sys.exit(130)
    """
)


def make_csv(path: Path) -> None:
    block = "".join(f"{i},customer {i % 977},{i / 100},2024-01-{i % 28 + 1:02d}\n" for i in range(100_000))
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write("id,customer,amount,day\n")
        for _ in range(16):
            handle.write(block)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="4 runs")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.quick:
        args.runs = 4
    chance = random.Random(args.seed)
    outcomes = {"stopped": 0, "finished_first": 0, "threads_left": 0, "crashes": 0, "other": 0}
    with tempfile.TemporaryDirectory(prefix="sqale-ctrl-c-") as tmp:
        source = Path(tmp) / "sales.csv"
        make_csv(source)
        for run in range(args.runs):
            env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "SQALE_DESKTOP_HOME": f"{tmp}/home{run}"}
            child = subprocess.Popen(
                [sys.executable, "-c", CHILD, str(source)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as from a terminal
            )
            assert child.stdout is not None
            child.stdout.readline()
            time.sleep(chance.uniform(0.0, 2.5))
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=120)
            left = [line for line in out.decode().splitlines() if line.startswith("left running: ")]
            if child.returncode == 130:
                kind = "threads_left" if left and left[0] != "left running: " else "stopped"
            elif child.returncode == 0 or child.returncode == -signal.SIGINT:
                kind = "finished_first"  # the signal came after the import (Python's own exit)
            elif child.returncode < 0 or "Fatal Python error" in err.decode():
                kind = "crashes"
            else:
                kind = "other"
            outcomes[kind] += 1
            print(f"run {run}: {kind} (exit {child.returncode})", flush=True)
            if kind in ("crashes", "other"):
                print(textwrap.indent(err.decode()[-1500:], "    "), flush=True)
    print(json.dumps({"runs": args.runs, **outcomes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
