"""Limits a hostile or broken server cannot stretch: a deadline per completion (a stalled server, or
one that trickles keep-alive comments forever), a client-side ``max_tokens`` (a server that ignores
it), and a 200 answer of random bytes, which is an error, not an empty answer."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import pytest

from sqale_desktop.core.engines.base import EngineError
from sqale_desktop.core.engines.openai_http import MAX_CHARS_PER_TOKEN, OpenAIEngine
from tests.core.engines.sse_server import (
    DONE,
    GENEROUS_S,
    SAMPLING,
    Stream,
    chunk,
    event,
)


def _generate(url: str, max_tokens: int = 50, deadline_s: float = 300.0) -> tuple[list[str], str | None]:
    session = OpenAIEngine(url, model="m", completion_deadline_s=deadline_s).new_session("p")
    texts = list(session.generate(max_tokens, SAMPLING, threading.Event()))
    return texts, session.last_finish_reason


def _in_thread(work: Callable[[], object]) -> list[BaseException]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GENEROUS_S)
    assert not thread.is_alive(), "the completion outlived its deadline"
    return errors


def test_a_keep_alive_trickle_ends_at_the_completion_deadline(serve: Callable[[Stream], str]) -> None:
    """Every comment resets the read timeout, so only a deadline on the whole completion ends it."""
    pings: list[bytes | float | threading.Event] = []
    for _ in range(2000):
        pings += [b": ping\n\n", 0.02]
    url = serve(Stream([event(chunk("first")), *pings, DONE]))
    errors = _in_thread(lambda: _generate(url, deadline_s=0.5))
    assert len(errors) == 1 and isinstance(errors[0], EngineError)
    assert str(errors[0]) == f"the server at {url} did not finish the completion within 0.5 s"


def test_a_stalled_server_ends_at_the_completion_deadline(serve: Callable[[Stream], str]) -> None:
    url = serve(Stream([event(chunk("first")), threading.Event(), DONE]))
    errors = _in_thread(lambda: _generate(url, deadline_s=0.5))
    assert len(errors) == 1 and "did not finish the completion within 0.5 s" in str(errors[0])


def test_a_server_ignoring_max_tokens_is_cut_by_the_client(serve: Callable[[Stream], str]) -> None:
    url = serve(Stream([event(chunk("word ")) for _ in range(5000)] + [DONE]))
    texts, finish = _generate(url, max_tokens=50)
    assert len(texts) == 50 and finish == "length"


def test_one_huge_chunk_is_cut_at_the_character_bound(serve: Callable[[Stream], str]) -> None:
    url = serve(Stream([event(chunk("x" * 1_000_000)), DONE]))
    texts, finish = _generate(url, max_tokens=50)
    assert len("".join(texts)) == 50 * MAX_CHARS_PER_TOKEN and finish == "length"


def test_a_200_of_random_bytes_is_an_error_not_an_empty_answer(serve: Callable[[Stream], str]) -> None:
    noise = random.Random(0).randbytes(8192).replace(b"data", b"xxxx")
    url = serve(Stream([noise]))
    with pytest.raises(EngineError, match=r"malformed response: .*no completion"):
        _generate(url)


def test_an_honest_empty_completion_is_still_an_answer(serve: Callable[[Stream], str]) -> None:
    url = serve(Stream([event(chunk("", "stop")), DONE]))
    assert _generate(url) == ([], "stop")
