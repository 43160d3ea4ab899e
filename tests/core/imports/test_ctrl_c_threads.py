"""Ctrl+C (a real SIGINT to this process) while the fast path's threads run: the import lets the
KeyboardInterrupt go up only once every thread it started has ended.

Before, it waited with ``Thread.join``, which CPython before 3.13 can mark as ended while the
thread still runs when a KeyboardInterrupt interrupts it (python/cpython#90882); the writer was
then still inside ADBC as the interpreter exited, and crashed it ("PyGILState_Release ...
finalizing").  ``benchmarks/ctrl_c_imports.py`` counts such crashes over many runs.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core.imports import ImportLimits, ImportProgress, import_source, threads


@pytest.fixture
def python_ctrl_c() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in the main thread, as in a terminal."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _ctrl_c_soon(times: int = 1, gap_s: float = 0.05) -> threading.Event:
    """Send SIGINT ``times`` to the main thread from another one (so that it interrupts the main
    thread's blocking wait, as a terminal's Ctrl+C does); the event is set once all are sent."""
    sent = threading.Event()
    main = threading.main_thread().ident
    assert main is not None

    def send() -> None:
        for _ in range(times):
            time.sleep(gap_s)
            signal.pthread_kill(main, signal.SIGINT)
        sent.set()

    threading.Thread(target=send, name="test-ctrl-c", daemon=True).start()
    return sent


@pytest.mark.usefixtures("python_ctrl_c")
def test_ctrl_c_mid_import_goes_up_only_after_every_thread_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, left_in_cache: Any
) -> None:
    path = tmp_path / "big.csv"
    path.write_text("a,b\n" + "".join(f"{i},{i}\n" for i in range(300_000)), encoding="utf-8")
    started: list[threads.ImportThread] = []
    real_start = threads.ImportThread.start

    def recorded(self: threads.ImportThread) -> None:
        started.append(self)
        real_start(self)

    monkeypatch.setattr(threads.ImportThread, "start", recorded)
    sending: list[threading.Event] = []
    returned = []

    def progress(report: ImportProgress) -> None:
        if report.rows > 0 and not sending:
            sending.append(_ctrl_c_soon())

    with pytest.raises(KeyboardInterrupt):
        import_source(path, progress=progress, limits=ImportLimits(fast_text_bytes=0, block_bytes=8192))
        returned.append(True)
        sending[0].wait(5)
        time.sleep(5)  # the signal lands here, and the test fails below
    assert returned == [], "the import ended before Ctrl+C: make the file larger"
    names = sorted(t.name for t in started)
    assert "import-read" in names and "import-write" in names, names
    assert [t.name for t in started if not t.ended.is_set()] == []
    assert left_in_cache() == []


@pytest.mark.usefixtures("python_ctrl_c")
def test_stop_and_wait_waits_through_ctrl_c() -> None:
    stop = threading.Event()

    sent = _ctrl_c_soon(times=3, gap_s=0.1)

    def work() -> None:
        stop.wait(60)
        sent.wait(30)  # the thread ends only after every Ctrl+C has come
        time.sleep(0.2)

    worker = threads.ImportThread(work, "import-test")
    worker.start()
    threads.stop_and_wait(stop, worker)
    assert sent.is_set() and worker.ended.is_set()


def test_ctrl_c_at_random_moments_of_child_imports_never_crashes() -> None:
    """``benchmarks/ctrl_c_imports.py`` for a few runs: real processes, real SIGINTs, a real exit."""
    import json
    import subprocess
    import sys

    from tests.helpers import REPO_ROOT

    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / "ctrl_c_imports.py"), "--quick", "--seed", "7"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["runs"] == 4
    assert (outcome["crashes"], outcome["threads_left"], outcome["other"]) == (0, 0, 0), done.stdout
