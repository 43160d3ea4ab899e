"""A raw server-sent-events server on 127.0.0.1: writes scripted bytes exactly as given (the SSE
tests); the ``serve`` fixture in this folder's conftest starts them."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trustme

from sqale_desktop.core.engines.base import SamplingParams

SAMPLING = SamplingParams(temperature=0.0, top_p=1.0, top_k=0, seed=1)
GENEROUS_S = 10.0  # a bound for "promptly" that only a hang can exceed; the server waits far longer
SERVER_WAIT_S = 60.0

# A step of a scripted answer: bytes to write (and flush), a threading.Event to wait on, or a pause
# in seconds (writes that far apart arrive in separate reads on loopback, though nothing promises it).
Step = bytes | threading.Event | float


@dataclass
class Stream:
    """What the server answers to ``POST /v1/completions``."""

    steps: list[Step] = field(default_factory=list)
    content_type: str = "text/event-stream"
    chunked: bool = False  # HTTP/1.1 chunked framing (uvicorn, llama-server) instead of close-delimited
    tls: bool = False  # https, with a certificate from a test CA the client is told to trust
    stall_before_headers: threading.Event | None = None
    waiting: threading.Event = field(default_factory=threading.Event)  # set while the server waits
    hung_up: threading.Event = field(default_factory=threading.Event)  # a write failed: client gone


def handler(stream: Stream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test output is ours."""

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if stream.stall_before_headers is not None:
                self._wait(stream.stall_before_headers)
                return
            self.send_response(200)
            self.send_header("Content-Type", stream.content_type)
            if stream.chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Connection", "close")
            self.end_headers()
            try:
                for step in stream.steps:
                    if isinstance(step, threading.Event):
                        self._wait(step)
                    elif isinstance(step, float):
                        time.sleep(step)
                    else:
                        self._write(step)
                if stream.chunked:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
            except OSError:
                stream.hung_up.set()
            self.close_connection = True

        def _write(self, data: bytes) -> None:
            if stream.chunked:
                data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
            self.wfile.write(data)
            self.wfile.flush()

        def _wait(self, event: threading.Event) -> None:
            stream.waiting.set()
            event.wait(SERVER_WAIT_S)
            stream.waiting.clear()

    return Handler


def chunk(text: str, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}


def event(payload: dict[str, Any], end: bytes = b"\n") -> bytes:
    """One event, its data on one line in UTF-8 (not ASCII escapes), with the given line end."""
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + end + end


DONE = b"data: [DONE]\n\n"


@contextmanager
def serving(tmp_path: Path, setenv: Callable[[str, str], None]) -> Iterator[Callable[[Stream], str]]:
    """Starts a server for a ``Stream``; returns its base URL.  Stopped (and unstalled) at teardown.

    For TLS the client trusts the test CA through ``SSL_CERT_FILE``, as a user with a company CA would.
    """
    started: list[tuple[ThreadingHTTPServer, threading.Thread, Stream]] = []

    def start(stream: Stream) -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler(stream))
        httpd.daemon_threads = True
        if stream.tls:
            ca = trustme.CA()
            server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ca.issue_cert("127.0.0.1").configure_cert(server_tls)
            ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
            setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
            httpd.socket = server_tls.wrap_socket(httpd.socket, server_side=True)
        thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        started.append((httpd, thread, stream))
        scheme = "https" if stream.tls else "http"
        return f"{scheme}://127.0.0.1:{httpd.server_address[1]}"

    try:
        yield start
    finally:
        _stop(started)


def _stop(started: list[tuple[ThreadingHTTPServer, threading.Thread, Stream]]) -> None:
    for httpd, thread, stream in started:
        for step in [*stream.steps, stream.stall_before_headers]:
            if isinstance(step, threading.Event):
                step.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
