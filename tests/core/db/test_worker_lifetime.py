"""A database worker lives as long as the app, whichever thread started it, and no longer.

Linux's ``PR_SET_PDEATHSIG`` counts the *thread* that started a process as its parent: workers
started from a thread that then ended (the pool's spare starter, an expired QThreadPool thread)
were killed with SIGKILL while the app still used them ("cannot open chinook.sqlite: the database
worker ended (SIGKILL)", a UI test that failed now and then).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from sqale_desktop.core.db.process import WorkerProcess
from tests.helpers import REPO_ROOT, readline_within


def _database(tmp_path: Path) -> Path:
    path = tmp_path / "t.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (a INTEGER)")
        conn.execute("INSERT INTO t VALUES (7)")
    conn.close()
    return path


def test_a_worker_started_by_a_thread_that_ended_still_answers(tmp_path: Path) -> None:
    """The starting thread opens the database (so the worker is fully set up), then ends."""
    path = _database(tmp_path)
    started: list[tuple[WorkerProcess, object]] = []

    def start() -> None:
        worker = WorkerProcess(0)
        opened = worker.call(("open", str(path), False, True), time.monotonic() + 30, lambda: False)
        started.append((worker, opened))

    starter = threading.Thread(target=start)
    starter.start()
    starter.join(timeout=60)
    assert not starter.is_alive() and started
    worker, opened = started[0]
    try:
        assert isinstance(opened, tuple) and opened[0] == "ok", opened
        reply = worker.call(
            ("execute", [], "SELECT a FROM t", (), 10, time.monotonic() + 10, 10.0),
            time.monotonic() + 30,
            lambda: False,
        )
        assert reply[0] == "ok", reply
        assert list(reply[1][1]) == [(7,)]
        assert worker.alive
    finally:
        worker.end()


_APP = """\
import sys
from sqale_desktop.core.db.process import WorkerProcess
worker = WorkerProcess(0)
print(worker.pid, flush=True)
sys.stdin.readline()
import os
os._exit(0)  # the app dies without ending its worker
"""


def test_a_worker_ends_when_the_app_dies(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    app = subprocess.Popen(
        [sys.executable, "-c", _APP], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert app.stdout is not None and app.stdin is not None
        pid = int(readline_within(app.stdout))
        assert _alive(pid)
        app.stdin.write("\n")
        app.stdin.flush()
        assert app.wait(timeout=30) == 0
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "the worker outlived the app"
    finally:
        app.kill()
        app.wait()


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, ended but not yet reaped by init, counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
