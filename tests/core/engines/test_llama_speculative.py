"""Prompt-lookup speculative decoding in the llama engine, on SmolLM2 and the tiny random qwen35.

The qwen35 file has the real architecture's hybrid memory (recurrent state that cannot simply
be truncated), so every rollback method is exercised on it.  Each engine is created with
speculation enabled (which also turns flash attention on, for exact batch/sequential logits)
and compared with itself with ``engine.speculation = "off"``: same numerics, drafting or not.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.engines.llama.session import LlamaSession
from tests.core.engines.llama_helpers import SYSTEM, run, small_engine, user_turn

GREEDY = SamplingParams(temperature=0.0, top_k=20, top_p=0.95, seed=0)
HOT = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, seed=7)

ROWS = "".join(
    f"customer_id={i}, first_name=Name{i}, last_name=Last{i}, email=name{i}@example.com\n" for i in range(6)
)
# An episode with tool calls whose results the next turns can copy from.
TURNS = [
    f"Tool result (sample_rows customers):\n{ROWS}Repeat the rows above exactly.",
    'Tool result (run_query "SELECT email FROM customers"):\n'
    + "".join(f"name{i}@example.com\n" for i in range(6))
    + "Write the SQL again and list the emails.",
]


def make_engine(path: Path, **kwargs: Any) -> LlamaEngine:
    return small_engine(path, speculation="on", **kwargs)


@pytest.fixture(scope="module", params=["smollm2", "qwen35-tiny"])
def engine(request: pytest.FixtureRequest, tiny_path: Path, smollm2_path: Path) -> Iterator[LlamaEngine]:
    eng = make_engine(smollm2_path if request.param == "smollm2" else tiny_path)
    yield eng
    eng.close()


def episode(engine: LlamaEngine, mode: str, sampling: SamplingParams, tokens: int = 80) -> LlamaSession:
    engine.speculation = mode  # type: ignore[assignment]
    try:
        session = engine.new_session(SYSTEM)
        for turn, text in enumerate(TURNS):
            session.append(user_turn(text))
            run(session, tokens, SamplingParams(**{**sampling.__dict__, "seed": (sampling.seed or 0) + turn}))
            session.end_turn()
        return session
    finally:
        engine.speculation = "on"


def evaluated(session: LlamaSession) -> int:
    return session.stats.evaluated_tokens + session.reused_tokens


def test_greedy_output_is_identical_with_and_without_speculation(engine: LlamaEngine) -> None:
    plain = episode(engine, "off", GREEDY)
    drafted = episode(engine, "on", GREEDY)
    assert drafted.history == plain.history
    assert drafted.stats.completion_tokens == plain.stats.completion_tokens
    assert drafted.stats.drafted_tokens > 0 and drafted.stats.accepted_tokens > 0
    assert plain.stats.drafted_tokens == 0
    # Memory holds exactly the history but its final <|im_end|> (and, after a length stop, the
    # last sampled token): no rejected draft left over, nothing evaluated twice.
    held = engine.evaluated_tokens
    assert held == drafted.history[: len(held)]
    assert len(drafted.history) - 2 <= len(held) <= len(drafted.history) - 1
    assert evaluated(drafted) == len(held)


@pytest.mark.parametrize("rollback", ["snapshots", "partial-state", "full-state"])
def test_every_rollback_method_leaves_the_state_of_the_accepted_tokens(
    tiny_path: Path, rollback: str
) -> None:
    """Hot sampling rejects drafts; the state after each rollback must be the true one.

    Checked two ways: the same seed gives the same tokens as without speculation would not
    (different random streams), so instead the final state is compared with a fresh engine that
    evaluates the same ids from scratch.
    """
    eng = make_engine(tiny_path, rollback=rollback)  # type: ignore[arg-type]
    assert eng.model.rollback == rollback
    session = episode(eng, "on", HOT, tokens=60)
    assert session.stats.drafted_tokens > session.stats.accepted_tokens  # there were rejections
    assert eng.counters.rollback_failures == 0
    held = eng.evaluated_tokens
    assert held == session.history[: len(held)] and len(held) >= len(session.history) - 2
    cancel = threading.Event()
    assert eng.ensure_evaluated(session.history, cancel, session.stats)[0]
    after = np.array(eng.memory.logits_row(-1), copy=True)
    eng.close()

    fresh = make_engine(tiny_path)
    fresh.speculation = "off"
    fresh_session = fresh.new_session(SYSTEM)
    fresh_session.history[:] = session.history
    assert fresh.ensure_evaluated(fresh_session.history, cancel, fresh_session.stats)[0]
    reference = np.array(fresh.memory.logits_row(-1), copy=True)
    fresh.close()
    assert int(np.argmax(after)) == int(np.argmax(reference))
    assert np.abs(after - reference).max() < 1e-3


def test_budgets_end_turns_at_exactly_the_same_token_count(engine: LlamaEngine) -> None:
    for budget in (1, 2, 5, 17):
        counts = []
        for mode in ("off", "on"):
            engine.speculation = mode  # type: ignore[assignment]
            session = engine.new_session(SYSTEM)
            session.append(user_turn(TURNS[0]))
            run(session, budget, GREEDY)
            counts.append(
                (session.stats.completion_tokens, session.last_finish_reason, list(session.history))
            )
        engine.speculation = "on"
        assert counts[0] == counts[1]
        if counts[1][1] == "length":
            assert counts[1][0] == budget


def test_cancel_during_a_verification_keeps_memory_consistent(
    engine: LlamaEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = engine.new_session(SYSTEM)
    session.append(user_turn(TURNS[0]))
    cancel = threading.Event()
    original = engine.memory.decode_all_logits
    verifications: list[int] = []

    def cancel_inside(tokens: list[int]) -> int:
        verifications.append(len(tokens))
        if len(verifications) == 2:
            cancel.set()  # the user presses Stop while the verification pass runs
        return original(tokens)

    monkeypatch.setattr(engine.memory, "decode_all_logits", cancel_inside)
    run(session, 200, GREEDY, cancel)
    monkeypatch.undo()
    assert len(verifications) == 2
    assert session.last_finish_reason == "cancelled"
    assert engine.evaluated_tokens == session.history[:-1]
    session.end_turn()
    before = session.stats.evaluated_tokens
    session.append(user_turn("Go on."))
    pending = len(session.history) - 1 - len(engine.evaluated_tokens)
    run(session, 4, GREEDY)
    assert pending > 0
    # The next turn evaluated only its own new tokens (and the ones it sampled): nothing twice.
    assert session.stats.evaluated_tokens > before
    assert evaluated(session) == len(session.history) - 1


def test_streamed_text_is_the_completion_with_speculation(engine: LlamaEngine) -> None:
    session = engine.new_session(SYSTEM)
    session.append(user_turn(TURNS[0]))
    start = len(session.history)
    deltas = list(session.generate(60, HOT, threading.Event()))
    sampled = session.history[start:]
    if engine.is_eog(sampled[-1]):
        sampled = sampled[:-1]
    whole = b"".join(engine.piece(t) for t in sampled).decode("utf-8", errors="replace")
    assert "".join(deltas) == whole
    assert session.stats.completion_tokens == len(session.history) - start


def test_an_end_token_inside_the_accepted_drafts_ends_the_turn_unevaluated(
    tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drafts accepted through ``<|endoftext|>``: emission stops there and it is not evaluated."""
    from sqale_desktop.core.engines.llama import speculation
    from sqale_desktop.core.engines.llama.speculative import Verdict

    eng = make_engine(tiny_path)
    try:
        eot = eng.vocabulary.endoftext
        assert eot is not None
        session = eng.new_session(SYSTEM)
        session.append(user_turn("x"))
        history = list(session.history)
        assert eng.ensure_evaluated(history, threading.Event(), session.stats)[0]
        last = eng.sample(eng.sampler(GREEDY))
        monkeypatch.setattr(speculation.speculative, "verify", lambda *a: Verdict(3, [40, eot, 41, 42]))
        assert eng.speculator is not None
        emitted = eng.speculator.verify(last, [40, eot, 41], GREEDY, np.random.default_rng(0), session.stats)
        assert emitted == [40, eot]
        assert eng.evaluated_tokens == [*history, last, 40]
        assert session.stats.accepted_tokens == 2
    finally:
        eng.close()
