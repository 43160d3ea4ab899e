"""The OpenAI-compatible engine reads server-sent events by the WHATWG rules, and Stop is prompt.

A real HTTP server on 127.0.0.1 writes scripted bytes exactly as given: several ``data:`` lines in
one event, comments, ``id:``/``retry:``/``event:`` fields, CRLF and CR line ends, a byte-order
mark, events cut across network writes.  Each test reads the text deltas the engine yields.
The stall tests keep the server waiting (before its headers, or mid-stream) while Stop is pressed,
and check that the engine gave up while the server was still waiting.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trustme

from sqale_desktop.core.engines.base import EngineError, SamplingParams
from sqale_desktop.core.engines.openai_http import OpenAIEngine

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


def _handler(stream: Stream) -> type[BaseHTTPRequestHandler]:
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


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Stream], str]]:
    """Starts a server for a ``Stream``; returns its base URL.  Stopped (and unstalled) at teardown.

    For TLS the client trusts the test CA through ``SSL_CERT_FILE``, as a user with a company CA would.
    """
    started: list[tuple[ThreadingHTTPServer, threading.Thread, Stream]] = []

    def start(stream: Stream) -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stream))
        httpd.daemon_threads = True
        if stream.tls:
            ca = trustme.CA()
            server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ca.issue_cert("127.0.0.1").configure_cert(server_tls)
            ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
            monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
            httpd.socket = server_tls.wrap_socket(httpd.socket, server_side=True)
        thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        started.append((httpd, thread, stream))
        scheme = "https" if stream.tls else "http"
        return f"{scheme}://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd, thread, stream in started:
        for step in [*stream.steps, stream.stall_before_headers]:
            if isinstance(step, threading.Event):
                step.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def chunk(text: str, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}


def event(payload: dict[str, Any], end: bytes = b"\n") -> bytes:
    """One event, its data on one line in UTF-8 (not ASCII escapes), with the given line end."""
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + end + end


DONE = b"data: [DONE]\n\n"


def texts(url: str, cancel: threading.Event | None = None) -> list[str]:
    session = OpenAIEngine(url, model="m").new_session("p")
    return list(session.generate(50, SAMPLING, cancel or threading.Event()))


def test_several_data_lines_are_one_event(serve: Callable[[Stream], str]) -> None:
    """The data lines of one event make one payload (the earlier reader parsed each line alone)."""
    lines = [
        b'data: {"choices": [{"index": 0,\n',
        b'data:  "text": "two lines",\n',
        b'data:"finish_reason": null}]}\n',
    ]
    url = serve(Stream([b"".join(lines) + b"\n", event(chunk("!")), DONE]))
    assert texts(url) == ["two lines", "!"]


def test_comments_fields_and_events_without_data_are_not_text(serve: Callable[[Stream], str]) -> None:
    lines = [
        b": keep-alive",
        b"",
        b":",
        b"retry: 3000",
        b"",  # an event of a retry hint and no data: not dispatched under the spec
        b"id: 7",
        b"event: completion",
        b": a comment inside an event",
        b"unknown-field: ignored",
        b"data: " + json.dumps(chunk("a")).encode(),
        b"",
        b"id",  # a field without a colon (an empty id), and no data
        b"",
    ]
    url = serve(Stream([b"\n".join(lines) + b"\n" + event(chunk("b")) + DONE]))
    assert texts(url) == ["a", "b"]


@pytest.mark.parametrize("end", [b"\r\n", b"\r", b"\n"], ids=["crlf", "cr", "lf"])
def test_every_line_end_of_the_spec(serve: Callable[[Stream], str], end: bytes) -> None:
    url = serve(Stream([event(chunk("x"), end) + event(chunk("y"), end) + b"data: [DONE]" + end + end]))
    assert texts(url) == ["x", "y"]


def test_a_leading_byte_order_mark_is_dropped(serve: Callable[[Stream], str]) -> None:
    """UTF-8 always, one leading BOM removed: the first event is not lost to a "\\ufeffdata" field."""
    url = serve(Stream([b"\xef\xbb\xbf" + event(chunk("first")) + event(chunk("second")) + DONE]))
    assert texts(url) == ["first", "second"]


def test_an_event_cut_across_network_writes(serve: Callable[[Stream], str]) -> None:
    """The second event is cut inside its JSON and inside a two-byte character ("é").

    Its tail is only written once the client has yielded the first event, so the client must
    have read the two halves in separate reads and put them together.
    """
    first_seen = threading.Event()
    second = event(chunk("café"), b"\r\n")
    cut = second.index("é".encode()) + 1  # between the two bytes of "é"
    url = serve(Stream([event(chunk("one")) + second[:cut], first_seen, second[cut:], DONE]))
    session = OpenAIEngine(url, model="m").new_session("p")
    received = []
    for text in session.generate(50, SAMPLING, threading.Event()):
        received.append(text)
        first_seen.set()
    assert received == ["one", "café"]


def test_a_crlf_cut_between_its_cr_and_its_lf(serve: Callable[[Stream], str]) -> None:
    """A CR at the end of one write and the LF at the start of the next are one line end, not two.

    The event has two data lines; read as two line ends, the CR/LF pair would make a blank line
    that ends the event after half of its JSON (a malformed response).
    """
    head = b'data: {"choices": [{"index": 0,\r'
    tail = b'\ndata: "text": "a", "finish_reason": null}]}\r\n\r\n'
    url = serve(Stream([head, 0.1, tail, event(chunk("b")), DONE]))
    assert texts(url) == ["a", "b"]


def test_data_that_is_not_json_is_a_malformed_response(serve: Callable[[Stream], str]) -> None:
    url = serve(Stream([event(chunk("fine ")) + b'data: {"choices": [{"text": "cut\n\n' + DONE]))
    with pytest.raises(EngineError, match="malformed response: an event is not JSON"):
        texts(url)


def test_an_answer_that_is_not_an_event_stream_is_an_error(serve: Callable[[Stream], str]) -> None:
    url = serve(Stream([json.dumps({"choices": [{"text": "x"}]}).encode()], content_type="application/json"))
    with pytest.raises(EngineError, match=r"malformed response.*text/event-stream"):
        texts(url)


@dataclass
class Run:
    """A generation running in its own thread, as the app's worker runs it."""

    thread: threading.Thread
    texts: list[str] = field(default_factory=list)
    got_text: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None
    finish: str | None = None


def generate_in_thread(url: str, cancel: threading.Event, timeout_s: float = 300.0) -> Run:
    session = OpenAIEngine(url, model="m", timeout_s=timeout_s).new_session("p")

    def work() -> None:
        try:
            for text in session.generate(50, SAMPLING, cancel):
                run.texts.append(text)
                run.got_text.set()
        except Exception as exc:
            run.error = exc
        run.finish = session.last_finish_reason

    run = Run(threading.Thread(target=work, daemon=True, name="test-generate"))
    run.thread.start()
    return run


def test_a_stream_over_tls(serve: Callable[[Stream], str]) -> None:
    url = serve(Stream([event(chunk("secure")), event(chunk(" line")), DONE], tls=True))
    assert url.startswith("https://")
    assert texts(url) == ["secure", " line"]


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
@pytest.mark.parametrize("chunked", [False, True], ids=["close-delimited", "chunked"])
def test_stop_ends_a_read_stalled_mid_stream(
    serve: Callable[[Stream], str], chunked: bool, tls: bool
) -> None:
    stall = threading.Event()
    stream = Stream([event(chunk("first")), stall, event(chunk("never")), DONE], chunked=chunked, tls=tls)
    url = serve(stream)
    cancel = threading.Event()
    run = generate_in_thread(url, cancel)
    assert run.got_text.wait(GENEROUS_S) and stream.waiting.wait(GENEROUS_S)
    cancel.set()
    run.thread.join(GENEROUS_S)
    assert not run.thread.is_alive(), "Stop did not end the blocked read"
    assert stream.waiting.is_set()  # the server is still stalled: the client gave up on its own
    assert run.error is None
    assert run.texts == ["first"] and run.finish == "cancelled"


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_stop_ends_a_wait_for_a_server_that_has_not_answered(
    serve: Callable[[Stream], str], tls: bool
) -> None:
    """A server still prefilling (no headers yet): Stop does not wait for it."""
    stream = Stream(stall_before_headers=threading.Event(), tls=tls)
    url = serve(stream)
    cancel = threading.Event()
    run = generate_in_thread(url, cancel)
    assert stream.waiting.wait(GENEROUS_S)
    cancel.set()
    run.thread.join(GENEROUS_S)
    assert not run.thread.is_alive(), "Stop did not end the wait for the headers"
    assert stream.waiting.is_set()
    assert run.error is None and run.texts == [] and run.finish == "cancelled"


def test_a_silent_server_times_out_with_a_readable_message(serve: Callable[[Stream], str]) -> None:
    stall = threading.Event()
    url = serve(Stream([event(chunk("first")), stall, DONE]))
    run = generate_in_thread(url, threading.Event(), timeout_s=0.3)
    run.thread.join(GENEROUS_S)
    assert not run.thread.is_alive()
    assert run.texts == ["first"]
    assert isinstance(run.error, EngineError)
    assert str(run.error) == f"the server at {url} sent nothing for 0.3 s (timed out)"


def test_a_server_that_never_answers_times_out_with_a_readable_message(
    serve: Callable[[Stream], str],
) -> None:
    url = serve(Stream(stall_before_headers=threading.Event()))
    with pytest.raises(EngineError) as info:
        list(
            OpenAIEngine(url, model="m", timeout_s=0.3)
            .new_session("p")
            .generate(5, SAMPLING, threading.Event())
        )
    assert str(info.value) == f"the server at {url} did not answer within 0.3 s (timed out)"
