"""Exact speculative sampling for a deterministic draft, with the sampler chain's own distribution.

The target distribution at every position is the one ``llama_sampler.SamplerChain`` samples
from, rebuilt in numpy from the logits in the same order and float32 arithmetic (top-k, then
temperature, then top-p with llama.cpp's "first index where the running sum reaches p" rule,
then min-p): the exact distribution of the plain path, not an approximation of it.

Accepting draft token ``d`` with probability ``p(d)`` and, on the first rejection, drawing from
``p`` with ``d`` removed and renormalised reproduces ``p`` exactly when the draft is a point
mass (Leviathan et al. 2023 with ``q = δ_d``: ``P(x) = p(d)·[x=d] + (1-p(d))·p(x)/(1-p(d))·[x≠d]
= p(x)``).  When every draft is accepted, a bonus token is drawn from the last position.  With a
temperature of 0 the distribution is a point mass on the largest logit, so acceptance is
"draft equals argmax" and the output is the plain greedy output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sqale_desktop.core.engines.base import SamplingParams

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


def supported(params: SamplingParams) -> bool:
    """Whether ``target`` reproduces the chain for these settings (no repetition penalty)."""
    return params.repeat_penalty == 1.0


@dataclass(frozen=True)
class Target:
    """A sparse distribution: token ids and their probabilities (float64, summing to 1)."""

    ids: IntArray
    probs: npt.NDArray[np.float64]

    def prob(self, token: int) -> float:
        hit = np.flatnonzero(self.ids == token)
        return float(self.probs[hit[0]]) if hit.size else 0.0


def target(logits: FloatArray, params: SamplingParams) -> Target:
    """The sampler chain's distribution for one row of logits (see the module docstring)."""
    n_vocab = logits.shape[0]
    if params.temperature <= 0.0:
        best = int(np.argmax(logits))
        return Target(np.array([best], dtype=np.int64), np.ones(1))
    k = params.top_k if 0 < params.top_k < n_vocab else n_vocab
    ids = np.argpartition(logits, n_vocab - k)[n_vocab - k :] if k < n_vocab else np.arange(n_vocab)
    scaled = (logits[ids] / np.float32(params.temperature)).astype(np.float32)
    order = np.argsort(-scaled, kind="stable")
    ids, scaled = ids[order].astype(np.int64), scaled[order]
    if params.top_p < 1.0:
        p = np.exp(scaled - scaled[0], dtype=np.float32)
        p = p / p.sum(dtype=np.float32)
        cum = np.cumsum(p, dtype=np.float32)
        reached = np.flatnonzero(cum >= np.float32(params.top_p))
        keep = int(reached[0]) + 1 if reached.size else len(ids)
        ids, scaled = ids[:keep], scaled[:keep]
    if params.min_p > 0.0 and len(ids) > 1:
        # llama.cpp's min-p on sorted logits: keep l >= max + log(min_p).
        keep_mask = scaled >= scaled[0] + np.float32(np.log(params.min_p))
        ids, scaled = ids[keep_mask], scaled[keep_mask]
    weights = np.exp(scaled.astype(np.float64) - float(scaled[0]))
    return Target(ids, weights / weights.sum())


def _draw(dist: Target, rng: np.random.Generator) -> int:
    if dist.ids.size == 1:
        return int(dist.ids[0])
    return int(rng.choice(dist.ids, p=dist.probs))


def residual(dist: Target, removed: int) -> Target:
    """``dist`` with ``removed`` taken out and the rest renormalised (the rejection distribution)."""
    keep = dist.ids != removed
    probs = dist.probs[keep]
    total = probs.sum()
    if total <= 0.0:  # only reachable when p(removed) == 1, where rejection never happens
        return dist
    return Target(dist.ids[keep], probs / total)


@dataclass(frozen=True)
class Verdict:
    """Outcome of one verification: the tokens to emit (accepted drafts, then one more)."""

    accepted: int
    tokens: list[int]


def verify(
    draft: Sequence[int],
    rows: Sequence[FloatArray],
    params: SamplingParams,
    rng: np.random.Generator,
) -> Verdict:
    """Accept a prefix of ``draft`` against ``rows`` (logits after the last token, then after each draft).

    ``rows`` has ``len(draft) + 1`` entries.  Returns the accepted drafts followed by the
    corrected token (first rejection) or the bonus token (all accepted).
    """
    if len(rows) != len(draft) + 1:
        raise ValueError("need one row of logits per draft token plus one")
    out: list[int] = []
    for i, d in enumerate(draft):
        dist = target(rows[i], params)
        p_d = dist.prob(d)
        if p_d >= 1.0 or (p_d > 0.0 and rng.random() < p_d):
            out.append(int(d))
            continue
        out.append(_draw(residual(dist, int(d)), rng))
        return Verdict(i, out)
    out.append(_draw(target(rows[len(draft)], params), rng))
    return Verdict(len(draft), out)


def sample(row: FloatArray, params: SamplingParams, rng: np.random.Generator) -> int:
    """One token from the chain's distribution (used by tests to compare with the C chain)."""
    return _draw(target(row, params), rng)
