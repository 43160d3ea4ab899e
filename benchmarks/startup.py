"""Start-up figures for the installed app: frozen folder (`make package`) against the checkout.

    .venv/bin/python benchmarks/startup.py [--quick] [--app dist/sqale-desktop]

1. Window: a fresh process `sqale-desktop chinook.sqlite` (offscreen), from launch to the window
   shown and to chinook's tab open, using the app's SQALE_DESKTOP_QUIT_AFTER_SHOWN hook (it prints
   one JSON line at each point and quits).  Median of 5 runs (--quick) or 11; target for the
   frozen app: shown <= 1.0 s.
2. CLI: `sqale-desktop query --db chinook.sqlite "SELECT count(*) FROM Track"`, launch to exit,
   median of the same number of runs.
3. Sizes of the folder, the .tar.gz and the .deb, and the folder's largest parts.

Each run gets a fresh SQALE_DESKTOP_HOME.  Without a frozen folder its figures are null (and
say so); the checkout's are measured anyway.  Prints figures, then ONE JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHINOOK = REPO.parent / "shared" / "data" / "sample" / "chinook.sqlite"


def _env(home: str) -> dict[str, str]:
    env = dict(os.environ, SQALE_DESKTOP_HOME=home, QT_QPA_PLATFORM="offscreen")
    env["SQALE_DESKTOP_QUIT_AFTER_SHOWN"] = "1"
    env.pop("PYTHONPATH", None)
    return env


def launch_window(command: list[str], cwd: Path) -> tuple[float, float]:
    """Seconds from launch to the "shown" and to the "ready" line of the quit hook."""
    with tempfile.TemporaryDirectory(prefix="sqale-startup-") as home:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [*command, str(CHINOOK)], cwd=cwd, env=_env(home), stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        shown = ready = float("nan")
        assert proc.stdout is not None
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if event["event"] == "shown":
                shown = time.perf_counter() - started
            elif event["event"] == "ready":
                ready = time.perf_counter() - started
                if event["tabs"] != [str(CHINOOK)]:
                    raise RuntimeError(f"unexpected tabs: {event['tabs']}")
        if proc.wait(timeout=120) != 0:
            raise RuntimeError(f"{command[0]} exited {proc.returncode}")
    return shown, ready


def run_cli(command: list[str], cwd: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="sqale-startup-") as home:
        started = time.perf_counter()
        subprocess.run(
            [*command, "query", "--db", str(CHINOOK), "SELECT count(*) FROM Track"],
            cwd=cwd, env=_env(home), check=True, capture_output=True,
        )  # fmt: skip
        return time.perf_counter() - started


def measure(command: list[str], runs: int) -> dict[str, float]:
    shown, ready, cli = [], [], []
    for _ in range(runs):
        s, r = launch_window(command, REPO)
        shown.append(s)
        ready.append(r)
        cli.append(run_cli(command, REPO))
    return {
        "window_shown_s": round(statistics.median(shown), 3),
        "tab_open_s": round(statistics.median(ready), 3),
        "cli_query_s": round(statistics.median(cli), 3),
        "window_shown_min_s": round(min(shown), 3),
    }


def du_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def sizes(app: Path) -> dict[str, object]:
    dist = app.parent
    out: dict[str, object] = {"folder_mb": round(du_bytes(app) / 1e6, 1)}
    for key, pattern in (("tar_gz_mb", "sqale-desktop-*-linux-*.tar.gz"), ("deb_mb", "sqale-desktop_*.deb")):
        found = sorted(dist.glob(pattern))
        out[key] = round(found[-1].stat().st_size / 1e6, 1) if found else None
    internal = app / "_internal"
    parts = (
        sorted(
            # PyInstaller links some libraries into the top folder: count each file once.
            ((du_bytes(p), p.name) for p in internal.iterdir() if not p.is_symlink()),
            reverse=True,
        )
        if internal.is_dir()
        else []
    )
    out["largest_mb"] = {name: round(size / 1e6, 1) for size, name in parts[:6]}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 runs each (the target's median of 5)")
    parser.add_argument("--app", type=Path, default=REPO / "dist" / "sqale-desktop", help="frozen folder")
    args = parser.parse_args()
    if not CHINOOK.is_file():
        print(f"missing {CHINOOK}", file=sys.stderr)
        return 1
    runs = 5 if args.quick else 11
    frozen_program = args.app / "sqale-desktop"
    result: dict[str, object] = {"runs": runs, "target_frozen_window_shown_s": 1.0}

    checkout = measure([sys.executable, "-m", "sqale_desktop"], runs)
    print(
        f"checkout: window shown {checkout['window_shown_s']} s, tab open {checkout['tab_open_s']} s, "
        f"CLI query {checkout['cli_query_s']} s (median of {runs})"
    )
    result["checkout"] = checkout
    if frozen_program.is_file():
        frozen = measure([str(frozen_program)], runs)
        print(
            f"frozen:   window shown {frozen['window_shown_s']} s (target <= 1.0 s), chinook tab open "
            f"{frozen['tab_open_s']} s, CLI query {frozen['cli_query_s']} s (median of {runs})"
        )
        result["frozen"] = frozen
        result["frozen_meets_target"] = frozen["window_shown_s"] <= 1.0
        size = sizes(args.app)
        print(
            f"sizes: folder {size['folder_mb']} MB, tar.gz {size['tar_gz_mb']} MB, .deb {size['deb_mb']} MB; "
            f"largest: {size['largest_mb']}"
        )
        result["sizes"] = size
    else:
        print(f"no frozen app at {args.app} (run `make package`): frozen figures are null")
        result["frozen"] = None
        result["sizes"] = None
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
