"""A small OpenAI-compatible completion server on 127.0.0.1 for the engine, ``ask`` and window tests.

It answers ``/v1/completions`` with scripted SSE chunks (and ``/v1/models``); the ``server`` fixture
in ``tests/conftest.py`` starts one per test.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY = "sk-test-0123456789abcdef"


@dataclass
class Script:
    """What the fake server answers: one list of text chunks per completion request."""

    completions: list[list[str]] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: bool = True
    status: int = 200
    error_body: str = ""
    stall: threading.Event | None = None  # when set up, the server waits on it after the first chunk
    models: list[str] = field(default_factory=lambda: ["trl-lab/qwen3.5-2b-grpo-sqale"])
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    raw_events: list[Any] | None = None  # sent as they are (hostile servers), instead of completions


def handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test output is ours."""

        def do_GET(self) -> None:
            script.paths.append(self.path)
            body = json.dumps({"object": "list", "data": [{"id": m} for m in script.models]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            script.paths.append(self.path)
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length))
            script.requests.append(request)
            script.headers.append(dict(self.headers))
            if script.status != 200:
                body = script.error_body.encode()
                self.send_response(script.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            chunks = script.completions[len(script.requests) - 1] if script.completions else []
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            if script.raw_events is not None:
                for raw in script.raw_events:
                    self.wfile.write(b"data: " + json.dumps(raw).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True
                return
            try:
                for number, chunk in enumerate(chunks):
                    self._event({"choices": [{"index": 0, "text": chunk, "finish_reason": None}]})
                    if number == 0 and script.stall is not None:
                        script.stall.wait(10)
                        return
                self._event({"choices": [{"index": 0, "text": "", "finish_reason": script.finish_reason}]})
                if script.usage:
                    prompt_tokens = len(request["prompt"].split())
                    usage = {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": len(chunks),
                        "prompt_tokens_details": {"cached_tokens": prompt_tokens // 2},
                    }
                    self._event({"choices": [], "usage": usage})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except OSError:
                return  # the client hung up (cancel)
            self.close_connection = True

        def _event(self, payload: dict[str, Any]) -> None:
            self.wfile.write(b": keep-alive\n\ndata: " + json.dumps(payload).encode() + b"\n\n")
            self.wfile.flush()

    return Handler


@contextmanager
def running_server() -> Iterator[tuple[str, Script]]:
    """A server for one test: its base URL and the ``Script`` it answers from (and records into)."""
    script = Script()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler(script))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    finally:
        if script.stall is not None:
            script.stall.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
