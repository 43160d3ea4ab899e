"""The OpenAI-compatible engine reads server-sent events by the WHATWG rules, and Stop is prompt.

A real HTTP server on 127.0.0.1 writes scripted bytes exactly as given: several ``data:`` lines in
one event, comments, ``id:``/``retry:``/``event:`` fields, CRLF and CR line ends, a byte-order
mark, events cut across network writes.  Each test reads the text deltas the engine yields.
The stall tests keep the server waiting (before its headers, or mid-stream) while Stop is pressed,
and check that the engine gave up while the server was still waiting.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from sqale_desktop.core.engines.base import EngineError
from sqale_desktop.core.engines.openai_http import OpenAIEngine
from tests.core.engines.sse_server import DONE, GENEROUS_S, SAMPLING, Stream, chunk, event


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
