"""Ctrl+C during ``eval run`` stops the run cleanly: a message, exit status 1, nothing half-saved."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT, readline_within, shared_data


@dataclass
class Stalling:
    """The server's address, and a count of the completion requests that reached it."""

    url: str
    arrivals: threading.Semaphore


def _stalling_handler(
    arrivals: threading.Semaphore, release: threading.Event
) -> type[BaseHTTPRequestHandler]:
    class StallingServer(BaseHTTPRequestHandler):
        """Lists one model, then never answers a completion: every episode is mid-request at Ctrl+C."""

        def do_GET(self) -> None:
            body = json.dumps({"data": [{"id": "stall"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            arrivals.release()
            release.wait(30)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return StallingServer


@pytest.fixture
def stalling() -> Iterator[Stalling]:
    arrivals, release = threading.Semaphore(0), threading.Event()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _stalling_handler(arrivals, release))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Stalling(f"http://127.0.0.1:{server.server_address[1]}", arrivals)
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_ctrl_c_stops_the_run_with_a_message(tmp_path: Path, stalling: Stalling) -> None:
    questions = shared_data("text2sql/spider/questions.json")
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "SQALE_DESKTOP_HOME": str(tmp_path / "home")}
    env.pop("SQALE_DESKTOP_API_KEY", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "sqale_desktop", "eval", "run", str(questions), "--engine", "openai",
         "--base-url", stalling.url, "--concurrency", "2", "--limit", "5", "--out", str(run_dir)],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=REPO_ROOT,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        first = readline_within(process.stderr).decode()
        assert first.startswith("run folder:"), first
        for _ in range(2):  # both episodes (--concurrency 2) are waiting on the server now
            assert stalling.arrivals.acquire(timeout=60), "an episode never reached the server"
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
        stopped_in = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = err.decode()
    assert process.returncode == 1, text
    assert "stopped: 0 episodes saved; continue with --resume" in text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert stopped_in < 10
    assert (run_dir / "run.json").is_file()
    assert (run_dir / "episodes.jsonl").read_text(encoding="utf-8") == ""  # cancelled episodes are not saved
