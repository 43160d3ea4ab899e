"""Ctrl+C while ``query`` imports a large CSV: a message, exit status 130, nothing kept in the cache.

The import runs on the fast path (a parsing thread and a writing thread); the signal reaches the
main thread, which stops both.  The source is untouched.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import REPO_ROOT, fingerprint


def test_ctrl_c_during_an_import_keeps_nothing(tmp_path: Path) -> None:
    source = tmp_path / "sales.csv"
    with open(source, "w", encoding="utf-8", newline="") as handle:
        handle.write("id,customer,amount,day\n")
        block = "".join(
            f"{i},customer {i % 977},{i / 100},2024-01-{i % 28 + 1:02d}\n" for i in range(100_000)
        )
        for _ in range(16):  # about 60 MB: seconds of importing, far more than the signal needs
            handle.write(block)
    before = fingerprint(source)
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "SQALE_DESKTOP_HOME": str(home)}
    process = subprocess.Popen(
        [sys.executable, "-m", "sqale_desktop", "query", "--db", str(source), "SELECT count(*) FROM sales"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO_ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as from a terminal
    )
    try:
        deadline = time.monotonic() + 60
        while not list((home / "cache" / "imports").glob("*/.building/*")):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the import never started"
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = err.decode()
    assert process.returncode == 130, text
    assert "query: stopped (Ctrl+C)" in text
    assert "Traceback" not in text
    assert out == b""
    assert [p for p in (home / "cache").rglob("*") if p.is_file()] == []
    assert fingerprint(source) == before
