"""The server API key never lands in traces, history, settings or logs after a run that used it.

A small OpenAI-compatible server on 127.0.0.1 streams scripted completions and records the
``Authorization`` header it receives (so the test can fail: the key really is used).  The key
lives only in the session keyring (no keyring backend here).  Then ``ask --trace --json`` runs,
an episode is stored in the history database, and a second server that *echoes the header back in
its error body* is asked too.  Everything written or printed is grepped for the key.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from keyring.backends import fail

from sqale_desktop import cli
from sqale_desktop.core import logs, paths, secrets, settings

KEY = "sk-SQALE-very-secret-key-0123456789"
SCRIPT = [
    '<think>\nList the tables.\n</think>\n\n{"tool": "list_tables"}',
    '<think>\nCount.\n</think>\n\n{"tool": "submit_sql", "args": {"sql": "SELECT COUNT(*) FROM Artist"}}',
]


class _Server:
    def __init__(self, echo_error: bool) -> None:
        self.auth: list[str | None] = []
        self.calls = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                server.auth.append(self.headers.get("Authorization"))
                self._send(200, json.dumps({"data": [{"id": "m"}]}).encode(), "application/json")

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                auth = self.headers.get("Authorization")
                server.auth.append(auth)
                if echo_error:  # a misbehaving server that quotes the request back
                    self._send(
                        401, json.dumps({"error": f"bad credentials: {auth}"}).encode(), "application/json"
                    )
                    return
                text = SCRIPT[min(server.calls, len(SCRIPT) - 1)]
                server.calls += 1
                events = [
                    {"choices": [{"index": 0, "text": text, "finish_reason": None}]},
                    {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]},
                ]
                body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
                self._send(200, body + b"data: [DONE]\n\n", "text/event-stream")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def servers() -> Iterator[tuple[_Server, _Server]]:
    good, echo = _Server(echo_error=False), _Server(echo_error=True)
    yield good, echo
    good.stop()
    echo.stop()


@pytest.fixture
def debug_log() -> Iterator[Path]:
    """Everything logged at DEBUG, by every library, into the app's own log file (``core.logs``).

    The CLI configures logging itself on every call; ``--verbose`` below keeps it at DEBUG.
    """
    root = logging.getLogger()
    old = root.level
    log_file = logs.configure(verbose=True)
    assert log_file.parent == paths.log_dir()
    yield log_file
    logs.reset()
    root.setLevel(old)


def test_api_key_absent_from_trace_history_settings_and_logs(
    servers: tuple[_Server, _Server],
    debug_log: Path,
    chinook: Path,
    isolated_home: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sqale_desktop.core.agent.loop import run_episode
    from sqale_desktop.core.db import open_readonly
    from sqale_desktop.core.engines.openai_http import OpenAIEngine
    from sqale_desktop.core.history import History
    from sqale_desktop.core.tools import ToolBox

    good, echo = servers
    caplog.set_level(logging.DEBUG)
    monkeypatch.delenv("SQALE_DESKTOP_API_KEY", raising=False)
    secrets.use_backend(fail.Keyring())
    try:
        secrets.set_secret(secrets.SERVER_API_KEY, KEY)
        s = settings.Settings(engine="openai", server_url=good.url)
        settings.save(s)
        args = ["ask", "--db", str(chinook), "--question", "How many artists?", "--engine", "openai"]
        assert cli.main(["--verbose", *args, "--base-url", good.url, "--trace", "--json"]) == 0
        assert cli.main(["--verbose", *args, "--base-url", echo.url, "--trace"]) == 1

        db = open_readonly(chinook)
        try:
            events = list(
                run_episode("How many artists?", db, ToolBox(db), OpenAIEngine(good.url, api_key=KEY))
            )
        finally:
            db.close()
        episode = events[-1].episode  # type: ignore[attr-defined]
        history = History()
        conversation = history.conversation_for(chinook)
        history.finish_episode(history.add_question(conversation.id, "How many artists?"), episode)
    finally:
        secrets.use_backend(None)

    assert f"Bearer {KEY}" in good.auth and f"Bearer {KEY}" in echo.auth  # the key was really used
    captured = capsys.readouterr()
    assert '"submit_sql"' in captured.out  # the JSON trace of the first run is there to grep
    assert KEY not in captured.out and KEY not in captured.err
    assert KEY not in caplog.text
    assert KEY not in json.dumps(episode.to_json(), default=str)
    written = [p for p in isolated_home.rglob("*") if p.is_file()]
    names = {p.name for p in written}
    assert {"settings.json", debug_log.name} <= names and any(n.endswith((".db", ".sqlite")) for n in names)
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
