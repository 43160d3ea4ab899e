"""Follow-ups on the llama engine: a finished session's exact ids, continued without re-evaluating.

On SmolLM2 and the tiny random-weight qwen35, whose hybrid memory cannot be truncated: one wrong
id anywhere would make it evaluate the whole thread again, so these tests count what it evaluates.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sqale_desktop.core.engines.llama.engine import THREADS_KEPT, LlamaEngine
from tests.core.engines.llama_helpers import GREEDY, SYSTEM, run, small_engine, user_turn


@pytest.fixture(scope="module", params=["smollm2", "qwen35-tiny"])
def engine(request: pytest.FixtureRequest, tiny_path: Path, smollm2_path: Path) -> Iterator[LlamaEngine]:
    path = smollm2_path if request.param == "smollm2" else tiny_path
    eng = small_engine(path)
    yield eng
    eng.close()


def finished_thread(engine: LlamaEngine, question: str) -> tuple[str, list[int]]:
    session = engine.new_session(SYSTEM)
    session.append(user_turn(question))
    run(session, 6, GREEDY)
    session.end_turn()
    text, ids = session.prompt_text, list(session.history)
    session.close()
    return text, ids


def test_a_follow_up_evaluates_only_its_new_tokens(engine: LlamaEngine) -> None:
    text, ids = finished_thread(engine, "How many tracks?")
    held = engine.evaluated_tokens
    # the thread's closing <|im_end|> (and a last token sampled at a length stop) were never
    # evaluated; everything before them still is
    assert held == ids[: len(held)] and len(held) >= len(ids) - 2
    follow = engine.continue_session(text)
    assert follow.history == ids  # the sampled ids, not the text tokenized again
    follow.append("\n" + user_turn("And per album?"))
    run(follow, 4, GREEDY)
    new_tokens = len(follow.history) - len(ids)
    # memory grew by a pure append: the new turn, and the thread's unevaluated end (the last
    # sampled token of the follow-up is evaluated by the next turn, as always)
    assert follow.stats.evaluated_tokens == len(follow.history) - 1 - len(held) <= new_tokens + 1
    assert follow.reused_tokens == 0


def test_a_thread_is_continued_from_its_ids_after_other_work(engine: LlamaEngine) -> None:
    text, ids = finished_thread(engine, "Which artist?")
    finished_thread(engine, "Something else entirely?")  # memory now holds another episode
    follow = engine.continue_session(text)
    assert follow.history == ids
    follow.append("\n" + user_turn("Only the first?"))
    run(follow, 2, GREEDY)
    # honest: memory had to be rebuilt (from the cached system turn), so more than the new tokens ran
    assert follow.stats.evaluated_tokens + follow.reused_tokens == len(follow.history) - 1


def test_an_unknown_thread_is_tokenized_and_the_kept_ids_are_bounded(engine: LlamaEngine) -> None:
    text = SYSTEM + user_turn("Never asked here?") + "An answer.<|im_end|>"
    session = engine.continue_session(text)
    bos = [engine.vocabulary.bos] if engine.vocabulary.add_bos else []
    assert session.history == bos + engine.tokenize(text)
    session.close()
    for number in range(THREADS_KEPT + 2):
        engine.new_session(SYSTEM + user_turn(f"question {number}")).close()
    assert engine.threads_kept == THREADS_KEPT


def test_after_a_relaunch_the_thread_comes_back_from_its_saved_state(tiny_path: Path) -> None:
    first = small_engine(tiny_path)
    text, ids = finished_thread(first, "How many tracks?")
    first.close()
    relaunched = small_engine(tiny_path)
    try:
        follow = relaunched.continue_session(text)
        held = relaunched.evaluated_tokens
        assert follow.history == ids and held == ids[: len(held)] and len(held) >= len(ids) - 2
        follow.append("\n" + user_turn("And per album?"))
        run(follow, 4, GREEDY)
        assert follow.stats.evaluated_tokens == len(follow.history) - 1 - len(held)
    finally:
        relaunched.close()


def test_without_saved_states_a_relaunch_evaluates_the_thread_again(
    tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQALE_DESKTOP_NO_STATE_CACHE", "1")
    first = small_engine(tiny_path)
    text, _ids = finished_thread(first, "How many tracks?")
    first.close()
    relaunched = small_engine(tiny_path)
    try:
        follow = relaunched.continue_session(text)
        assert relaunched.evaluated_tokens == []
        follow.append("\n" + user_turn("And per album?"))
        run(follow, 2, GREEDY)
        assert follow.stats.evaluated_tokens == len(follow.history) - 1  # all of it, honestly
    finally:
        relaunched.close()
