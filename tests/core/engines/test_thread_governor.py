"""The decode thread governor on made-up machines, and its wiring into the llama.cpp engine.

The made-up machines have the shape measured on 2 cores (benchmarks/engine.py --policy-sweep):
idle, two threads beat one; with another program on a core, two spinning threads fall far
behind one.  Each step time gets +-8 % of seeded noise.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from pathlib import Path

import llama_cpp
import pytest

from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.engines.llama import thread_governor
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.engines.llama.thread_governor import ThreadGovernor

IDLE = {2: 0.050, 1: 0.070}
BUSY = {2: 0.160, 1: 0.075}
# Everything slower alike (a laptop throttling): fewer threads are no cure.
THROTTLED = {2: 0.100, 1: 0.140}
Machine = Callable[[int], dict[int, float]]


def run(
    governor: ThreadGovernor | None, machine: Machine, steps: int, seed: int = 7
) -> list[tuple[int, float]]:
    """(threads, seconds) of each step; ``None`` runs every step with the most threads."""
    rng = random.Random(seed)
    trace = []
    for step in range(steps):
        threads = governor.threads() if governor is not None else max(IDLE)
        seconds = machine(step)[threads] * rng.uniform(0.92, 1.08)
        if governor is not None:
            governor.record(threads, seconds)
        trace.append((threads, seconds))
    return trace


def total(trace: list[tuple[int, float]], start: int = 0, end: int | None = None) -> float:
    return sum(seconds for _, seconds in trace[start:end])


def test_an_idle_machine_keeps_every_core_and_pays_under_one_percent() -> None:
    governor = ThreadGovernor(2)
    trace = run(governor, lambda _: IDLE, 3000)
    fixed = run(None, lambda _: IDLE, 3000)
    assert sum(1 for threads, _ in trace if threads == 1) < 0.02 * len(trace)
    assert total(trace) < 1.005 * total(fixed)
    assert governor.current == 2 and governor.switches == 0


def test_a_program_taking_a_core_moves_decoding_to_one_thread_at_once() -> None:
    governor = ThreadGovernor(2)
    trace = run(governor, lambda step: IDLE if step < 400 else BUSY, 1200)
    arrived = next(i for i, (threads, _) in enumerate(trace) if i >= 400 and threads == 1)
    assert arrived - 400 <= 2 * thread_governor.WINDOW + 2
    # Once there it stays: the busy stretch costs little more than one thread would.
    one_thread = run(ThreadGovernor(1), lambda _: BUSY, 1200)
    assert total(trace, 420) < 1.1 * total(one_thread, 420)
    assert governor.current == 1


def test_a_machine_already_busy_when_decoding_starts_is_found_out_early() -> None:
    """No slowdown to notice here: the first periodic trial, a few windows in, finds it."""
    governor = ThreadGovernor(2)
    trace = run(governor, lambda _: BUSY, 300)
    first = next(i for i, (threads, _) in enumerate(trace) if threads == 1)
    assert first <= thread_governor.EXPLORE_FIRST + 2 * thread_governor.WINDOW + 2
    assert governor.current == 1


def test_decoding_climbs_back_to_every_core_when_the_program_is_gone() -> None:
    governor = ThreadGovernor(2)
    trace = run(governor, lambda step: BUSY if 100 <= step < 600 else IDLE, 1400)
    assert trace[590][0] == 1
    back = next(
        i for i, (threads, _) in enumerate(trace) if i >= 600 and threads == 2 and governor.current == 2
    )
    assert back - 600 <= thread_governor.EXPLORE_MAX_MORE + 2 * thread_governor.WINDOW
    assert [threads for threads, _ in trace[-50:]].count(2) >= 45


def test_a_machine_slower_everywhere_does_not_make_it_flap() -> None:
    governor = ThreadGovernor(2)
    run(governor, lambda step: IDLE if step < 300 else THROTTLED, 2000)
    assert governor.current == 2
    assert governor.switches == 0
    assert governor.trials < 12  # one contention trial, then periodic ones backing off


def test_one_core_means_nothing_to_choose() -> None:
    governor = ThreadGovernor(1)
    trace = run(governor, lambda _: BUSY, 500)
    assert {threads for threads, _ in trace} == {1}
    assert governor.trials == 0


def test_a_step_timed_before_a_change_does_not_count_for_the_new_count() -> None:
    governor = ThreadGovernor(2)
    governor._start_trial(1)
    governor.record(2, 99.0)  # a step that started with 2 threads, reported late
    for _ in range(thread_governor.WINDOW + 1):
        governor.record(1, 0.070)
    assert governor.current == 2  # the 99 s step did not make 2 threads look slow


# -- wiring into the engine ------------------------------------------------------------------

GREEDY = SamplingParams(temperature=0.0, top_p=1.0, top_k=1, min_p=0.0, repeat_penalty=1.0, seed=0)


def greedy(engine: LlamaEngine) -> str:
    session = engine.new_session(
        "<|im_start|>user\nCount from one to twenty.<|im_end|>\n<|im_start|>assistant\n"
    )
    return "".join(session.generate(48, GREEDY, threading.Event()))


def test_automatic_threads_get_a_governor_and_a_fixed_count_does_not(smollm2_path: Path) -> None:
    automatic = LlamaEngine(smollm2_path, n_ctx=512, n_batch=64, n_ubatch=64)
    fixed = LlamaEngine(smollm2_path, n_ctx=512, n_batch=64, n_ubatch=64, n_threads=2)
    assert automatic.adapt_threads and not fixed.adapt_threads
    fixed.load()
    try:
        assert fixed.memory.governor is None
    finally:
        fixed.close()


@pytest.mark.parametrize("chosen", [1, 2])
def test_the_count_the_governor_picks_is_what_llama_cpp_decodes_with(
    chosen: int, smollm2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Keep it at the chosen count for the whole test: no contention trial, no periodic one.
    monkeypatch.setattr(thread_governor, "CONTENTION", float("inf"))
    engine = LlamaEngine(smollm2_path, n_ctx=512, n_batch=64, n_ubatch=64, n_threads=2, adapt_threads=True)
    reference = LlamaEngine(smollm2_path, n_ctx=512, n_batch=64, n_ubatch=64, n_threads=2)
    engine.load()
    reference.load()
    try:
        assert engine.memory.governor is not None
        engine.memory.governor.current = chosen
        engine.memory.governor._explore_every = 10**9
        text = greedy(engine)
        assert engine.memory.decode_threads == chosen
        assert llama_cpp.llama_n_threads(engine.model.ctx) == chosen
        assert llama_cpp.llama_n_threads_batch(engine.model.ctx) == 2  # prefill keeps every core
        # Each row of a matrix product is one thread's work, so the count does not change the text.
        assert text == greedy(reference)
    finally:
        engine.close()
        reference.close()
