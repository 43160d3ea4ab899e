"""A follow-up's prefetch on the llama engine: the thread and its next turn's fixed start, evaluated
while the person types, changing nothing of what is then evaluated or generated.

On SmolLM2 and the tiny random-weight qwen35 (hybrid memory: one id evaluated that the follow-up
does not continue would cost the whole thread again), greedy, so the same ids give the same text.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sqale_desktop.core.agent.followup import continued_prefix, continued_turn
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from tests.core.engines.llama_helpers import GREEDY, SYSTEM, run, small_engine, user_turn

OPENER = "<|im_start|>assistant\n<think>\n"
PROTOCOL = AgentProtocol()
HEAD = continued_prefix(PROTOCOL, OPENER)


def new_engine(path: Path) -> LlamaEngine:
    return small_engine(path)


@pytest.fixture(scope="module", params=["smollm2", "qwen35-tiny"])
def engine(request: pytest.FixtureRequest, tiny_path: Path, smollm2_path: Path) -> Iterator[LlamaEngine]:
    eng = new_engine(smollm2_path if request.param == "smollm2" else tiny_path)
    yield eng
    eng.close()


@dataclass
class FollowUp:
    history: list[int]
    text: str
    evaluated: int


def thread_text(engine: LlamaEngine, question: str) -> str:
    """A finished episode's text; its session closed, so the engine keeps its ids."""
    session = engine.new_session(SYSTEM)
    session.append(user_turn(question))
    run(session, 6, GREEDY)
    session.end_turn()
    text = session.prompt_text
    session.close()
    return text


def follow_up(engine: LlamaEngine, thread: str, question: str) -> FollowUp:
    """The continued follow-up as ``followup.open_follow_up`` builds it, one turn generated."""
    session = engine.continue_session(thread)
    session.append(continued_turn(PROTOCOL, question, OPENER))
    text = run(session, 8, GREEDY)
    result = FollowUp(list(session.history), text, session.stats.evaluated_tokens)
    session.end_turn()
    session.close()
    return result


def test_the_prefetched_follow_up_is_the_same_and_evaluates_fewer_tokens(engine: LlamaEngine) -> None:
    thread = thread_text(engine, "How many tracks?")
    plain = follow_up(engine, thread, "Only the rock ones?")
    thread = thread_text(engine, "How many tracks?")  # the same thread again (greedy), memory holds it
    prefetched = engine.prefetch_continuation(thread, HEAD, threading.Event())
    held = engine.evaluated_tokens
    fetched = follow_up(engine, thread, "Only the rock ones?")
    assert (fetched.history, fetched.text) == (plain.history, plain.text)
    assert held == fetched.history[: len(held)]  # memory held a prefix of the follow-up: a pure append
    # the fixed start of the turn (~30 tokens with the trained template), the thread's unevaluated end
    assert prefetched >= 20
    assert fetched.evaluated == plain.evaluated - prefetched


def test_a_follow_up_the_prefetch_did_not_guess_restores_the_thread(engine: LlamaEngine) -> None:
    thread = thread_text(engine, "Which artist?")
    plain = follow_up(engine, thread, "And the album?")
    thread = thread_text(engine, "Which artist?")
    engine.prefetch_continuation(thread, "\n<|im_start|>user\nSomething else entirely: ", threading.Event())
    fetched = follow_up(engine, thread, "And the album?")
    assert (fetched.history, fetched.text, fetched.evaluated) == (plain.history, plain.text, plain.evaluated)


def test_prefetching_the_same_follow_up_again_evaluates_nothing_more(engine: LlamaEngine) -> None:
    thread = thread_text(engine, "How many tracks?")
    plain = follow_up(engine, thread, "Only the rock ones?")
    thread = thread_text(engine, "How many tracks?")
    prefetched = engine.prefetch_continuation(thread, HEAD, threading.Event())
    assert engine.prefetch_continuation(thread, HEAD, threading.Event()) == 0  # the composer chose it twice
    fetched = follow_up(engine, thread, "Only the rock ones?")
    assert (fetched.history, fetched.evaluated) == (plain.history, plain.evaluated - prefetched)


def test_a_prefetch_after_other_work_evaluates_the_thread_as_the_follow_up_would(engine: LlamaEngine) -> None:
    thread = thread_text(engine, "Which artist?")
    thread_text(engine, "Something else entirely?")  # memory now holds another episode
    plain = follow_up(engine, thread, "And the album?")  # it evaluates the thread again
    thread = thread_text(engine, "Which artist?")
    thread_text(engine, "Something else entirely?")
    prefetched = engine.prefetch_continuation(thread, HEAD, threading.Event())
    fetched = follow_up(engine, thread, "And the album?")
    assert (fetched.history, fetched.text) == (plain.history, plain.text)
    assert prefetched > len(engine.tokenize(thread)) // 2  # the thread (from its system turn on)
    assert fetched.evaluated < plain.evaluated


def test_a_standalone_question_after_a_prefetch_is_unchanged(engine: LlamaEngine) -> None:
    def standalone() -> tuple[list[int], str, int]:
        session = engine.new_session(SYSTEM + user_turn("How many genres?"))
        text = run(session, 8, GREEDY)
        result = (list(session.history), text, session.stats.evaluated_tokens + session.reused_tokens)
        session.close()
        return result

    thread = thread_text(engine, "Which artist?")
    plain = standalone()
    engine.prefetch_continuation(thread, HEAD, threading.Event())
    assert standalone() == plain


def test_a_cancelled_prefetch_leaves_the_thread_as_it_was(engine: LlamaEngine) -> None:
    thread = thread_text(engine, "How many tracks?")
    plain = follow_up(engine, thread, "Only the rock ones?")
    thread = thread_text(engine, "How many tracks?")
    cancel = threading.Event()
    cancel.set()
    assert engine.prefetch_continuation(thread, HEAD, cancel) == 0
    fetched = follow_up(engine, thread, "Only the rock ones?")
    assert (fetched.history, fetched.text, fetched.evaluated) == (plain.history, plain.text, plain.evaluated)


def test_after_a_relaunch_the_prefetch_restores_the_thread_and_evaluates_only_the_fixed_start(
    tiny_path: Path,
) -> None:
    first = new_engine(tiny_path)
    try:
        thread = thread_text(first, "How many tracks?")
        plain = follow_up(first, thread, "Only the rock ones?")
    finally:
        first.close()
    relaunched = new_engine(tiny_path)
    try:
        prefetched = relaunched.prefetch_continuation(thread, HEAD, threading.Event())
        fetched = follow_up(relaunched, thread, "Only the rock ones?")
        assert (fetched.history, fetched.text) == (plain.history, plain.text)
        assert 20 <= prefetched < len(HEAD)  # the thread came back from its saved state, not evaluated
        assert fetched.evaluated == plain.evaluated - prefetched
    finally:
        relaunched.close()
