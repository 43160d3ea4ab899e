"""Prompt-lookup drafting and exact speculative sampling, without a model.

The target distribution must be the one llama.cpp's sampler chain samples from: it is checked
against the C chain itself on the same logits.  The acceptance rule must leave that distribution
unchanged: checked with a chi-square test at a strict threshold over many fixed-seed draws.
"""

from __future__ import annotations

import math

import llama_cpp
import numpy as np
import pytest

from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.engines.llama.llama_sampler import SamplerChain
from sqale_desktop.core.engines.llama.ngram_draft import AdaptiveDraftLength, NgramDrafter
from sqale_desktop.core.engines.llama.speculative import residual, supported, target, verify

MODEL_CARD = SamplingParams(temperature=0.6, top_p=0.95, top_k=20, min_p=0.0, seed=0)


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for a chi-square with ``df`` degrees of freedom (regularised upper gamma)."""
    a, z = df / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    if z < a + 1:  # series for the lower function
        term = total = 1.0 / a
        n = a
        while term > total * 1e-15:
            n += 1
            term *= z / n
            total += term
        return max(0.0, 1.0 - total * math.exp(-z + a * math.log(z) - math.lgamma(a)))
    # continued fraction for the upper function (Lentz)
    b, c, d = z + 1 - a, 1e300, 1.0 / (z + 1 - a)
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1.0 / d
        step = d * c
        h *= step
        if abs(step - 1) < 1e-15:
            break
    return h * math.exp(-z + a * math.log(z) - math.lgamma(a))


def test_chi2_sf_matches_known_values() -> None:
    assert chi2_sf(3.841, 1) == pytest.approx(0.05, abs=1e-3)
    assert chi2_sf(18.307, 10) == pytest.approx(0.05, abs=1e-3)
    assert chi2_sf(2.0, 4) == pytest.approx(0.7358, abs=1e-3)


def chain_distribution(logits: np.ndarray, params: SamplingParams) -> dict[int, float]:
    """What llama.cpp's own chain (``SamplerChain``) keeps and with which probabilities."""
    n = logits.shape[0]
    data = (llama_cpp.llama_token_data * n)()
    for i, value in enumerate(logits):
        data[i].id, data[i].logit, data[i].p = i, float(value), 0.0
    array = llama_cpp.llama_token_data_array(data, n, -1, False)
    chain = SamplerChain(params, n)
    try:
        chain.apply(ctypes_pointer(array))
    finally:
        chain.close()
    return {int(array.data[i].id): float(array.data[i].p) for i in range(array.size)}


def ctypes_pointer(array: llama_cpp.llama_token_data_array) -> object:
    import ctypes

    return ctypes.pointer(array)


@pytest.mark.parametrize(
    "params",
    [
        MODEL_CARD,
        SamplingParams(temperature=1.0, top_p=1.0, top_k=0, seed=0),
        SamplingParams(temperature=0.3, top_p=0.5, top_k=40, seed=0),
        SamplingParams(temperature=0.6, top_p=0.95, top_k=20, min_p=0.05, seed=0),
    ],
    ids=["model-card", "plain", "narrow", "min-p"],
)
def test_target_is_the_c_chains_distribution(params: SamplingParams) -> None:
    rng = np.random.default_rng(5)
    for _ in range(5):
        logits = (rng.standard_normal(2000) * 3).astype(np.float32)
        mine = target(logits, params)
        theirs = chain_distribution(logits, params)
        assert set(mine.ids.tolist()) == set(theirs)
        for token, p in zip(mine.ids.tolist(), mine.probs.tolist(), strict=True):
            assert p == pytest.approx(theirs[token], rel=1e-4, abs=1e-7)


def test_temperature_zero_is_a_point_mass_on_the_argmax() -> None:
    logits = np.array([0.1, 2.0, 1.9, -1.0], dtype=np.float32)
    dist = target(logits, SamplingParams(temperature=0.0, top_k=20, top_p=0.95))
    assert dist.ids.tolist() == [1] and dist.probs.tolist() == [1.0]
    rng = np.random.default_rng(0)
    greedy = SamplingParams(temperature=0.0)
    assert verify([1, 2], [logits, logits, logits], greedy, rng).tokens == [1, 1]
    assert verify([2], [logits, logits], greedy, rng).tokens == [1]  # rejected, corrected to argmax
    assert verify([1, 1], [logits, logits, logits], greedy, rng).accepted == 2


def test_residual_removes_the_draft_and_renormalises() -> None:
    dist = target(
        np.array([1.0, 2.0, 3.0], dtype=np.float32), SamplingParams(temperature=1.0, top_p=1.0, top_k=0)
    )
    rest = residual(dist, 2)
    assert 2 not in rest.ids.tolist()
    assert rest.probs.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("draft_token", [0, 3, 7], ids=["likely", "middling", "outside-top-k"])
def test_speculative_sampling_keeps_the_distribution(draft_token: int) -> None:
    """First emitted token of ``verify`` over 20,000 fixed-seed draws vs p: chi-square, p > 1e-4."""
    logits = np.array([3.0, 2.5, 2.0, 1.5, 1.0, 0.5, 0.0, -8.0], dtype=np.float32)
    params = SamplingParams(temperature=0.6, top_p=0.95, top_k=6)
    dist = target(logits, params)
    rng = np.random.default_rng(1234)
    draws = 20_000
    counts = {int(t): 0 for t in dist.ids}
    for _ in range(draws):
        token = verify([draft_token], [logits, logits], params, rng).tokens[0]
        assert token in counts  # never a token outside the chain's support
        counts[token] += 1
    expected = {int(t): float(p) * draws for t, p in zip(dist.ids, dist.probs, strict=True)}
    stat = sum((counts[t] - e) ** 2 / e for t, e in expected.items())
    assert chi2_sf(stat, len(expected) - 1) > 1e-4


def test_drafter_proposes_what_followed_the_latest_longest_match() -> None:
    drafter = NgramDrafter(max_n=3, min_n=2)
    history = [1, 2, 3, 4, 5, 9, 9, 1, 2, 3]
    draft, n = drafter.propose(history, 3)
    assert (draft, n) == ([4, 5, 9], 3)
    history += [7, 2, 3]  # "2 3" now also followed by 7... and "7 2 3" is new
    draft, n = drafter.propose(history, 2)
    assert n == 2 and draft == [7, 2]  # the latest "2 3" occurrence (followed by 7)
    assert drafter.propose([1, 2, 3, 4], 2) == ([], 0)  # a shorter history starts over: no match yet


def test_a_match_running_into_the_end_continues_the_period() -> None:
    drafter = NgramDrafter(max_n=2, min_n=2)
    assert drafter.propose([9, 1, 2, 1, 2], 5) == ([1, 2, 1, 2, 1], 2)
    assert drafter.propose([9, 1, 2, 1, 2, 1, 2, 7, 7, 7], 3) == ([7, 7, 7], 2)


def test_no_match_no_draft() -> None:
    drafter = NgramDrafter()
    assert drafter.propose(list(range(100)), 8) == ([], 0)
    assert drafter.propose([5, 5], 0) == ([], 0)


def test_adaptive_length_grows_on_full_acceptance_and_shrinks_on_rejection() -> None:
    length = AdaptiveDraftLength(k_max=8, k_start=2)
    length.update(2, 2)
    assert length.k == 4
    length.update(4, 4)
    assert length.k == 8
    length.update(8, 8)
    assert length.k == 8
    length.update(8, 1)
    assert length.k == 2
    length.update(2, 0)
    assert length.k == 1


def test_restricted_sizes_keep_the_verification_pass_on_cheap_lengths() -> None:
    length = AdaptiveDraftLength(k_max=7, k_start=7, sizes=(3, 7))
    assert (length.k, length.minimum) == (7, 3)
    length.update(7, 0)
    assert length.k == 3  # wants 1: the smallest allowed size
    length.update(3, 3)
    assert length.k == 3  # wants 6: the largest allowed size not above it
    length.update(3, 3)
    assert length.k == 7
    with pytest.raises(ValueError):
        AdaptiveDraftLength(k_max=2, sizes=(3,))


def test_speculation_needs_no_repetition_penalty() -> None:
    assert supported(MODEL_CARD)
    assert not supported(SamplingParams(repeat_penalty=1.1))


def test_auto_mode_stops_drafting_for_the_segment_once_it_loses() -> None:

    from sqale_desktop.core.engines.llama.speculation import Drafting

    think_end = 99
    drafting = Drafting(
        NgramDrafter(),
        AdaptiveDraftLength(3, 3, (3,)),
        np.random.default_rng(0),
        auto=True,
        segment_end=think_end,
    )
    plain_step_s = 0.1
    history = [1, 2, 3, 4, 5, 6, 1, 2, 3]
    assert drafting.propose(history, 8) == [4, 5, 6]
    for _ in range(3):  # 0.25 s for 2 tokens: 0.125 s per token, slower than a 0.1 s plain step
        drafting.record(3, [4, 7], 0.25, plain_step_s)
        assert not drafting.paused  # not judged before four verifications
    drafting.record(3, [4, 7], 0.25, plain_step_s)
    assert drafting.paused and drafting.propose(history, 8) == []
    drafting.record(0, [think_end], 0.0, plain_step_s)  # </think>: a new segment is judged afresh
    assert not drafting.paused

    winning = Drafting(
        NgramDrafter(), AdaptiveDraftLength(3, 3, (3,)), np.random.default_rng(0), auto=True, segment_end=None
    )
    for _ in range(6):
        winning.record(3, [4, 5, 6, 7], 0.2, plain_step_s)  # 0.05 s per token
    assert not winning.paused
