"""A llama.cpp sampler chain that samples the way the model was trained (vLLM's order).

vLLM, used in GRPO training, divides the logits by the temperature first and truncates
(top-k, then top-p) afterwards.  llama.cpp's default chain applies top-p *before* the
temperature, which keeps a different nucleus; that is the order that matters and the one this
chain fixes.  Top-k is applied first here: dividing by a positive temperature does not change
which k logits are largest, so top-k before or after it keeps the same tokens, and doing it
first means the temperature scales 20 logits instead of the whole 248k vocabulary (measured:
decode went from 0.95 to 1.0 of bare ``Llama.generate``'s rate on the 2B shape).  A
temperature of 0 keeps only the largest logit, which top-k never removes: greedy either way.
Every parameter is set explicitly on every chain: the library defaults (min_p 0.05, top_k 40)
are wrong for this model.
"""

from __future__ import annotations

from typing import Any

from sqale_desktop.core.engines.base import SamplingParams

# Only consulted when repeat_penalty != 1.0; the model card uses no penalty at all.
PENALTY_LAST_N = 64


def sampler_order(params: SamplingParams) -> list[tuple[str, tuple[float | int, ...]]]:
    """The chain as (stage, arguments) in application order: penalties, top-k, temp, top-p, min-p, dist.

    Kept separate from the ctypes calls so the order itself is testable.  ``top_k <= 0`` means
    no top-k cut (vLLM's -1, llama.cpp's 0), ``top_p`` 1.0 and ``min_p`` 0.0 keep everything.
    """
    seed = 0xFFFFFFFF if params.seed is None else params.seed & 0xFFFFFFFF
    return [
        ("penalties", (PENALTY_LAST_N, params.repeat_penalty, 0.0, 0.0)),
        ("top_k", (max(params.top_k, 0),)),
        ("temp", (params.temperature,)),
        ("top_p", (params.top_p, 1)),
        ("min_p", (params.min_p, 1)),
        ("dist", (seed,)),
    ]


class SamplerChain:
    """Owns one ``llama_sampler`` chain; free it with ``close()`` (a new chain per generation)."""

    def __init__(self, params: SamplingParams, n_vocab: int) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self.params = params
        self.stages = sampler_order(params)
        chain_params = llama_cpp.llama_sampler_chain_default_params()
        chain_params.no_perf = True
        self._chain: Any = llama_cpp.llama_sampler_chain_init(chain_params)
        for stage, args in self.stages:
            self._add(stage, args, n_vocab)

    def _add(self, stage: str, args: tuple[float | int, ...], n_vocab: int) -> None:
        lib = self._lib
        if stage == "penalties":
            last_n, repeat, freq, present = args
            smpl = lib.llama_sampler_init_penalties(
                n_vocab, int(last_n), float(repeat), float(freq), float(present)
            )
        elif stage == "temp":
            smpl = lib.llama_sampler_init_temp(float(args[0]))
        elif stage == "top_k":
            smpl = lib.llama_sampler_init_top_k(int(args[0]))
        elif stage == "top_p":
            smpl = lib.llama_sampler_init_top_p(float(args[0]), int(args[1]))
        elif stage == "min_p":
            smpl = lib.llama_sampler_init_min_p(float(args[0]), int(args[1]))
        else:
            smpl = lib.llama_sampler_init_dist(int(args[0]))
        lib.llama_sampler_chain_add(self._chain, smpl)

    def sample(self, ctx: Any) -> int:
        """Sample from the logits of the last evaluated token (and record it in the chain's history)."""
        return int(self._lib.llama_sampler_sample(self._chain, ctx, -1))

    def apply(self, candidates: Any) -> None:
        """Run the chain over ``candidates`` (a ``llama_token_data_array`` pointer) in place: the
        probabilities it leaves are the distribution ``sample`` draws from."""
        self._lib.llama_sampler_apply(self._chain, candidates)

    def close(self) -> None:
        if self._chain is not None:
            self._lib.llama_sampler_free(self._chain)
            self._chain = None
