"""The in-process llama.cpp engine on real GGUFs: SmolLM2-135M and a tiny random-weight qwen35.

The qwen35 file exercises the hybrid (recurrent + attention) memory the real model has: its
state cannot be truncated, so the token-level bookkeeping is what these tests are about.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from sqale_desktop.core.engines.base import EngineError, SamplingParams
from sqale_desktop.core.engines.llama.backends import load_backends
from sqale_desktop.core.engines.llama.cpu_info import physical_cores
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.engines.llama.session import LlamaSession
from sqale_desktop.core.engines.synthetic_gguf import CHAT_TEMPLATE
from tests.core.engines.llama_helpers import (
    GREEDY,
    SYSTEM,
    CancelInChunk,
    evaluated,
    long_turn_pending,
    run,
    small_engine,
    user_turn,
)
from tests.helpers import join_within


@pytest.fixture(scope="module", params=["smollm2", "qwen35-tiny"])
def engine(request: pytest.FixtureRequest, tiny_path: Path, smollm2_path: Path) -> Iterator[LlamaEngine]:
    path = smollm2_path if request.param == "smollm2" else tiny_path
    eng = small_engine(path)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def tiny_engine(tiny_path: Path) -> Iterator[LlamaEngine]:
    eng = small_engine(tiny_path)
    yield eng
    eng.close()


def test_loads_on_the_cpu_with_physical_core_threads(engine: LlamaEngine) -> None:
    info = engine.info()
    assert info.kind == "llama"
    # No GPU here: Mesa's software Vulkan device is skipped unless GGML_VK_VISIBLE_DEVICES names it.
    assert engine.describe().startswith(f"local CPU ({load_backends().cpu_label}; ")
    assert info.resident_bytes > 0
    assert engine.model.weights_bytes > 0
    assert LlamaEngine(engine.model_path).n_threads == physical_cores()
    assert engine.vocabulary.im_end is not None and engine.vocabulary.endoftext is not None


def test_chat_template_comes_from_gguf_metadata(tiny_engine: LlamaEngine) -> None:
    assert tiny_engine.chat_template() == CHAT_TEMPLATE


@pytest.mark.slow
def test_seven_turn_episode_evaluates_each_prompt_token_once(engine: LlamaEngine) -> None:
    session = engine.new_session(SYSTEM)
    kept: list[int] = []
    for turn in range(7):
        session.append(
            user_turn(f"Tool result: row {turn}\n[{6 - turn} tool turns left before you must answer]")
        )
        run(session, 24, SamplingParams(seed=turn))
        session.end_turn()
        # The history is only ever appended to: earlier ids (sampled ones included) never change.
        assert session.history[: len(kept)] == kept
        kept = list(session.history)
        assert session.history[-1] == engine.vocabulary.im_end
    stats = session.stats
    assert stats.prompt_tokens == len(session.history)
    # Everything but the trailing <|im_end|> (and, after a length stop, the last sampled token)
    # went through the model exactly once: no re-evaluation anywhere in seven turns.
    # (The system turn may come from the engine's cache, filled by an earlier test's session.)
    ran = stats.evaluated_tokens + session.reused_tokens
    assert stats.prompt_tokens - 2 <= ran <= stats.prompt_tokens - 1
    assert engine.evaluated_tokens == session.history[:ran]
    assert 7 <= stats.completion_tokens <= 7 * 24


def test_prompt_text_is_the_concatenated_prompt_and_completions(engine: LlamaEngine) -> None:
    session = engine.new_session(SYSTEM)
    session.append(user_turn("How many albums?"))
    completion = run(session, 16, SamplingParams(seed=5))
    session.end_turn()
    assert session.prompt_text.startswith(SYSTEM + user_turn("How many albums?"))
    assert session.prompt_text.endswith("<|im_end|>")
    middle = session.prompt_text[len(SYSTEM + user_turn("How many albums?")) : -len("<|im_end|>")]
    assert middle == completion


def test_same_seed_same_text_and_the_seed_matters(tiny_engine: LlamaEngine) -> None:
    hot = SamplingParams(temperature=1.0, top_p=1.0, top_k=0, seed=11)

    def sample(params: SamplingParams) -> list[int]:
        session = tiny_engine.new_session(SYSTEM)
        session.append(user_turn("List the tables."))
        run(session, 32, params)
        return session.history[-session.stats.completion_tokens :]

    first = sample(hot)
    assert sample(hot) == first
    assert sample(SamplingParams(temperature=1.0, top_p=1.0, top_k=0, seed=12)) != first


def greedy_reference(path: Path, prompt_ids: list[int], steps: int) -> list[int]:
    """Argmax decoding with llama-cpp-python's own eval/logits, independent of the engine."""
    llm = llama_cpp.Llama(str(path), n_ctx=256, n_threads=1, verbose=False)
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(llm.model))
    llm.eval(prompt_ids)
    out: list[int] = []
    for _ in range(steps):
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))
        token = int(np.argmax(logits))
        out.append(token)
        if llama_cpp.llama_vocab_is_eog(llama_cpp.llama_model_get_vocab(llm.model), token):
            break
        llm.eval([token])
    llm.close()
    return out


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0.0, top_k=20, top_p=0.95, seed=1),
        SamplingParams(temperature=1.0, top_k=1, top_p=1.0, seed=2),
    ],
    ids=["temperature-0", "top-k-1"],
)
def test_greedy_settings_reach_the_sampler(engine: LlamaEngine, params: SamplingParams) -> None:
    session = engine.new_session(SYSTEM)
    session.append(user_turn("Which customer spent the most?"))
    prompt = list(session.history)
    run(session, 12, params)
    sampled = session.history[len(prompt) :]
    assert sampled == greedy_reference(engine.model_path, prompt, len(sampled))


def test_cancel_between_tokens_stops_and_the_next_turn_reuses_the_cache(engine: LlamaEngine) -> None:
    session = engine.new_session(SYSTEM)
    session.append(user_turn("Describe the schema."))
    cancel = threading.Event()
    hot = SamplingParams(seed=3, temperature=1.0, top_k=0, top_p=1.0)
    for deltas, _ in enumerate(session.generate(200, hot, cancel), start=1):
        if deltas == 3:
            cancel.set()
    assert session.last_finish_reason == "cancelled"
    assert 3 <= session.stats.completion_tokens <= 4
    session.end_turn()
    session.append(user_turn("Go on."))
    run(session, 4, GREEDY)
    assert evaluated(session) == len(session.history) - 1


@pytest.mark.slow
def test_cancel_during_a_long_prefill_keeps_memory_consistent(engine: LlamaEngine) -> None:
    session = long_turn_pending(engine)
    assert len(session.history) - len(engine.evaluated_tokens) > 3 * engine.n_batch
    before = session.stats.evaluated_tokens
    aborted = engine.counters.aborted_chunks
    assert run(session, 8, GREEDY, CancelInChunk(engine, chunks=2)) == ""
    assert engine.counters.aborted_chunks == aborted + 1
    assert session.last_finish_reason == "cancelled"
    held = engine.evaluated_tokens
    # Only whole chunks reached memory; the aborted one was rolled back from its snapshot.
    assert held == session.history[: len(held)]
    assert len(held) < len(session.history)
    assert evaluated(session) == len(held)
    assert session.stats.evaluated_tokens == before + 2 * engine.n_batch

    resumed = run(session, 8, GREEDY)
    assert evaluated(session) == len(session.history) - 1  # nothing evaluated twice

    # The same turn without the cancel (same chunk boundaries) gives the same tokens: the
    # restored state is the state the model would have had.
    reference = long_turn_pending(engine)
    assert run(reference, 8, GREEDY) == resumed
    assert reference.history == session.history


def test_cancel_before_generate_returns_at_once(engine: LlamaEngine) -> None:
    session = engine.new_session(SYSTEM)
    session.append(user_turn("hello"))
    cancel = threading.Event()
    cancel.set()
    assert run(session, 8, GREEDY, cancel) == ""
    assert session.last_finish_reason == "cancelled"
    assert session.stats.completion_tokens == 0


def test_length_stop_then_end_turn_appends_im_end(engine: LlamaEngine) -> None:
    session = engine.new_session(SYSTEM)
    session.append(user_turn("Count to one hundred."))
    run(session, 3, SamplingParams(temperature=1.0, top_k=0, top_p=1.0, seed=4))
    assert session.last_finish_reason == "length"
    last_sampled = session.history[-1]
    session.end_turn()
    assert session.history[-2:] == [last_sampled, engine.vocabulary.im_end]
    session.end_turn()  # idempotent
    assert session.history[-2:] == [last_sampled, engine.vocabulary.im_end]


def find_stop(engine: LlamaEngine, wanted: int, budget: int = 400) -> LlamaSession:
    """A session whose completion ended by sampling ``wanted``, found by trying seeds in order."""
    hot = dict(temperature=1.0, top_k=0, top_p=1.0)
    for seed in range(200):
        session = engine.new_session(SYSTEM)
        session.append(user_turn("x"))
        run(session, budget, SamplingParams(seed=seed, **hot))  # type: ignore[arg-type]
        if session.last_finish_reason == "stop" and session.history[-1] == wanted:
            return session
    pytest.fail(f"no seed in 0..199 ended on token {wanted}")


def test_endoftext_is_swapped_for_im_end_without_reevaluation(tiny_engine: LlamaEngine) -> None:
    assert tiny_engine.vocabulary.endoftext is not None
    session = find_stop(tiny_engine, tiny_engine.vocabulary.endoftext)
    ran = session.stats.evaluated_tokens
    length = len(session.history)
    session.end_turn()
    assert len(session.history) == length
    assert session.history[-1] == tiny_engine.vocabulary.im_end
    assert session.stats.evaluated_tokens == ran
    assert session.prompt_text.endswith("<|im_end|>")
    session.append("\n" + user_turn("next"))
    run(session, 2, GREEDY)
    assert evaluated(session) == len(session.history) - 1


def test_utf8_split_across_tokens_streams_whole_characters(tiny_engine: LlamaEngine) -> None:
    # The tiny vocabulary is bytes plus a few merges, so any non-ASCII character the model samples
    # arrives as two or more tokens.  Search seeds (deterministically) for such a completion.
    hot = SamplingParams(temperature=1.0, top_k=0, top_p=1.0)
    for seed in range(100):
        session = tiny_engine.new_session(SYSTEM)
        session.append(user_turn("x"))
        start = len(session.history)
        deltas = list(
            session.generate(60, SamplingParams(**{**hot.__dict__, "seed": seed}), threading.Event())
        )
        sampled = session.history[start:]
        if tiny_engine.is_eog(sampled[-1]):
            sampled = sampled[:-1]
        raw = b"".join(tiny_engine.piece(t) for t in sampled)
        whole = raw.decode("utf-8", errors="replace")
        assert "".join(deltas) == whole
        multibyte = [ch for ch in whole if ord(ch) > 0x7F and ch != "\ufffd"]
        if multibyte:
            assert any(ch in delta for delta in deltas for ch in multibyte)
            assert not any("\ufffd" in d and any(ch in d for ch in multibyte) for d in deltas if len(d) == 1)
            return
    pytest.fail("no seed in 0..99 sampled a multi-byte character")


def test_a_second_thread_is_refused_while_one_is_generating(tiny_engine: LlamaEngine) -> None:
    session = tiny_engine.new_session(SYSTEM)
    session.append(user_turn("x"))
    stream = session.generate(
        50, SamplingParams(temperature=1.0, top_k=0, top_p=1.0, seed=1), threading.Event()
    )
    next(stream)
    errors: list[BaseException] = []

    def intrude() -> None:
        try:
            tiny_engine.new_session(SYSTEM)
        except RuntimeError as exc:
            errors.append(exc)

    worker = threading.Thread(target=intrude)
    worker.start()
    join_within(worker)
    stream.close()
    assert errors and "one owner thread" in str(errors[0])
    tiny_engine.new_session(SYSTEM).close()  # free again once the generator is closed


def test_switching_sessions_reevaluates_honestly(tiny_engine: LlamaEngine) -> None:
    first = tiny_engine.new_session(SYSTEM)
    first.append(user_turn("one"))
    run(first, 4, GREEDY)
    second = tiny_engine.new_session(SYSTEM)
    second.append(user_turn("two"))
    run(second, 4, GREEDY)
    first.end_turn()
    first.append(user_turn("again"))
    run(first, 4, GREEDY)
    # The first session's state was evicted by the second; it was rebuilt from its own ids.
    assert evaluated(first) > len(first.history) - 1
    assert tiny_engine.evaluated_tokens == first.history[:-1]


def test_missing_model_file_is_a_known_error(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="not found"):
        LlamaEngine(tmp_path / "absent.gguf").load()


def test_load_reports_progress_from_reading_the_file_to_a_loaded_model(
    smollm2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqale_desktop.core.engines.llama import loading as module

    monkeypatch.setattr(module, "READ_BLOCK", 8 * 2**20)  # several blocks for the ~100 MB file
    reports: list[float] = []
    eng = LlamaEngine(smollm2_path, n_ctx=512, n_threads=1)
    eng.load(progress=reports.append)
    assert eng.loaded
    assert len(reports) > 3
    assert reports == sorted(reports) and reports[-1] == 1.0
    # The whole file was read (the reading share reached) before llama.cpp built the model.
    assert reports[-2] == pytest.approx(module.READ_SHARE)
    eng.close()


def test_unreadable_model_file_is_a_known_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(EngineError, match="could not load"):
        LlamaEngine(bad).load()


def test_prompt_longer_than_the_context_is_a_known_error(tiny_path: Path) -> None:
    eng = LlamaEngine(tiny_path, n_ctx=64, n_threads=1)
    session = eng.new_session(SYSTEM + "word " * 80)
    with pytest.raises(EngineError, match="exceeds the context"):
        run(session, 4, GREEDY)
    eng.close()


def test_the_system_turn_is_evaluated_once_across_episodes(engine: LlamaEngine) -> None:
    system = "<|im_start|>system\n" + "Call one tool per line, then submit the SQL. " * 6 + "<|im_end|>\n"
    engine.close()  # a fresh engine: no cached system turn yet
    first = engine.new_session(system)
    first.append(user_turn("How many tracks?"))
    expected = run(first, 8, GREEDY)
    assert first.reused_tokens == 0
    assert first.stats.evaluated_tokens == len(first.history) - 1

    second = engine.new_session(system)
    second.append(user_turn("How many tracks?"))
    system_len = len(engine.new_session(system).history) - 1  # through <|im_end|>, not the newline
    assert run(second, 8, GREEDY) == expected  # the restored state is the evaluated one
    assert second.reused_tokens == system_len
    assert second.stats.evaluated_tokens == len(second.history) - 1 - system_len

    other = engine.new_session(system.replace("one tool", "two tools"))
    other.append(user_turn("How many tracks?"))
    run(other, 2, GREEDY)
    assert other.reused_tokens == 0


def test_rewind_regenerates_a_turn_without_reevaluating_the_prompt(engine: LlamaEngine) -> None:
    session = engine.new_session(SYSTEM)
    session.append(user_turn("List the tables."))
    mark = session.checkpoint()
    prompt = list(session.history)
    hot = SamplingParams(temperature=1.0, top_k=0, top_p=1.0)
    first = run(session, 10, SamplingParams(**{**hot.__dict__, "seed": 1}))
    ran = evaluated(session)
    session.rewind(mark)
    assert session.history == prompt
    assert session.prompt_text.endswith(user_turn("List the tables."))
    second = run(session, 10, SamplingParams(**{**hot.__dict__, "seed": 1}))
    assert second == first  # the restored state is the state the first attempt sampled from
    # Only the prompt's last token and the new completion went through the model again.
    assert evaluated(session) - ran == len(session.history) - len(prompt)
    session.end_turn()
    session.append(user_turn("next"))
    run(session, 2, GREEDY)
    assert engine.evaluated_tokens == session.history[:-1]
