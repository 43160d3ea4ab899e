"""Speculative decoding as one strategy: draft, verify in one pass, roll back what was rejected.

An n-gram drafter over the episode's own ids (``ngram_draft``) proposes up to k tokens; the
pending sampled token and the draft are evaluated in ONE ``llama_decode`` with logits at every
position; exact speculative sampling (``speculative``) accepts a prefix and draws one more
token, so the output has the sampler chain's distribution, and greedy output is the plain
greedy output.  The engine builds a :class:`Speculator` only when speculation is asked for;
with speculation off nothing here exists.

Exactness needs flash attention (``loading`` turns it on for such engines): without it
llama.cpp's CPU attention gives a token evaluated in a batch of three or more different logits
than the same token decoded alone.  Rounding-level differences remain where llama.cpp itself
takes another kernel for a batch (split-KV attention with several threads, repacked GEMM for 4+
rows of Q4_K): the same kind of difference as between prefilled and decoded tokens.

Rolling back after a rejection.  The hybrid model's recurrent state cannot be truncated, so
``LoadedModel.rollback`` names the way: "snapshots" (llama.cpp's per-token recurrent
snapshots, ``n_rs_seq``: a rejection is a plain truncation), "partial-state" / "full-state"
(restore a copy of the recurrent part or of the whole state taken before the pass, then
re-evaluate the accepted tokens), "truncate" for attention-only models.  What each costs, and
why speculation is off by default on a 2-core CPU: ``benchmarks/speculative.py``.

Invariants kept: memory always holds the history minus its final sampled token; a
verification's tokens are emitted as a unit (Stop is honoured between units, and a
verification is never aborted midway), budgets cap the draft so a turn ends at exactly the
same token count, an end-of-generation token inside accepted drafts ends the turn there,
unevaluated.

The strategy sees memory through :class:`DraftMemory` and the vocabulary through one callable,
never the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from sqale_desktop.core.engine_options import Speculation
from sqale_desktop.core.engines.base import EngineError, EngineStats, SamplingParams
from sqale_desktop.core.engines.llama import speculative
from sqale_desktop.core.engines.llama.memory import Counters
from sqale_desktop.core.engines.llama.ngram_draft import AdaptiveDraftLength, NgramDrafter

# Draft lengths to verify: 3 drafts + the pending token fill one 4-row GEMM of llama.cpp's
# repacked Q4_K kernels (see ngram_draft.AdaptiveDraftLength and benchmarks/speculative.py).
DRAFT_SIZES: tuple[int, ...] = (3,)
# Auto speculation judges a segment after this many verifications.
_AUTO_MIN_VERIFICATIONS = 4


class DraftMemory(Protocol):
    """What verification needs of the model's memory (``memory.Memory``)."""

    @property
    def tokens(self) -> list[int]: ...

    def __len__(self) -> int: ...

    def decode(self, tokens: list[int]) -> int: ...

    def decode_all_logits(self, tokens: list[int]) -> int: ...

    def logits_row(self, i: int) -> speculative.FloatArray: ...

    def snapshot(self) -> Any: ...

    def partial_snapshot(self) -> Any: ...

    def truncate(self, length: int) -> bool: ...

    def restore_partial(self, saved: Any, length: int) -> bool: ...

    def restore_state(self, saved: Any, length: int) -> bool: ...

    def reset(self) -> None: ...


class Drafting:
    """One turn's drafting: the episode's n-gram index, the adaptive draft length, and auto mode.

    Auto mode compares, per segment (thinking, then what follows ``</think>``), the time per
    token of the verified steps with the engine's plain decode step; once drafting has lost
    over ``_AUTO_MIN_VERIFICATIONS`` verifications it stops for the rest of the segment.
    Segments rather than the whole turn because thinking (which copies little) and the calls
    after it (which copy a lot) are one completion.
    """

    def __init__(
        self,
        drafter: NgramDrafter,
        length: AdaptiveDraftLength,
        rng: np.random.Generator,
        *,
        auto: bool,
        segment_end: int | None,
    ) -> None:
        self.drafter = drafter
        self.length = length
        self.rng = rng
        self.auto = auto
        self.segment_end = segment_end
        self.paused = False
        self._seconds = 0.0
        self._tokens = 0
        self._verifications = 0

    def propose(self, history: list[int], room: int) -> list[int]:
        if self.paused or room <= 0:
            return []
        draft, _ = self.drafter.propose(history, min(room, self.length.k))
        return draft if len(draft) >= self.length.minimum else []

    def record(self, drafted: int, tokens: list[int], seconds: float, plain_step_s: float) -> None:
        """Fold in one step: ``drafted`` tokens verified (0: a plain step) emitting ``tokens``."""
        if drafted:
            self.length.update(drafted, len(tokens) - 1)
            self._seconds += seconds
            self._tokens += len(tokens)
            self._verifications += 1
            if (
                self.auto
                and self._verifications >= _AUTO_MIN_VERIFICATIONS
                and plain_step_s > 0
                and self._seconds / self._tokens > plain_step_s
            ):
                self.paused = True
        if self.segment_end is not None and self.segment_end in tokens:
            self.paused = False
            self._seconds, self._tokens, self._verifications = 0.0, 0, 0


class Speculator:
    """Drafting, verification and rollback for one loaded model (built only when speculation is on)."""

    def __init__(
        self,
        memory: DraftMemory,
        is_eog: Callable[[int], bool],
        *,
        draft_sizes: tuple[int, ...],
        rollback: str,
        think_end: int | None,
        counters: Counters,
    ) -> None:
        self._memory = memory
        self._is_eog = is_eog
        self.draft_sizes = draft_sizes
        self.draft_max = draft_sizes[-1]
        self.rollback = rollback
        self._think_end = think_end
        self.counters = counters
        # Moving average of one plain decode step (decode + sample), seconds; auto mode compares with it.
        self.plain_step_s = 0.0

    def drafting(
        self, mode: Speculation, sampling: SamplingParams, drafter: Callable[[], NgramDrafter]
    ) -> Drafting | None:
        """This turn's drafting over ``drafter()`` (the session's index), or None where it cannot be exact."""
        if mode == "off" or not speculative.supported(sampling):
            return None
        return Drafting(
            drafter(),
            AdaptiveDraftLength(self.draft_max, self.draft_max, self.draft_sizes),
            np.random.default_rng(sampling.seed),
            auto=mode == "auto",
            segment_end=self._think_end,
        )

    def note_plain_step(self, seconds: float) -> None:
        """Fold one plain decode step's time into ``plain_step_s`` (what auto speculation must beat)."""
        self.plain_step_s = seconds if self.plain_step_s <= 0 else 0.9 * self.plain_step_s + 0.1 * seconds

    def verify(
        self,
        last: int,
        draft: list[int],
        params: SamplingParams,
        rng: np.random.Generator,
        stats: EngineStats,
    ) -> list[int]:
        """Evaluate ``last`` (the pending sampled token) and ``draft`` in one pass; return the tokens to emit.

        The returned tokens are the accepted drafts and one sampled token, cut after an
        end-of-generation token.  Afterwards memory holds ``last`` and every returned token but
        the final one, exactly as if they had been decoded one by one.
        """
        memory = self._memory
        base = len(memory)
        batch = [last, *draft]
        saved: Any = None
        if self.rollback == "partial-state":
            saved = memory.partial_snapshot()
        elif self.rollback == "full-state":
            saved = memory.snapshot()
        status = memory.decode_all_logits(batch)
        if status != 0:
            memory.reset()
            raise EngineError(f"llama_decode failed ({status}) while verifying a draft")
        rows = [memory.logits_row(i) for i in range(len(batch))]
        verdict = speculative.verify(draft, rows, params, rng)
        emitted = verdict.tokens
        for i, token in enumerate(emitted):
            if self._is_eog(token):
                emitted = emitted[: i + 1]
                break
        stats.drafted_tokens += len(draft)
        stats.accepted_tokens += min(verdict.accepted, len(emitted))
        keep = len(emitted)  # ``last`` and all emitted tokens but the final one
        if keep < len(batch):
            self.roll_back(base, batch[:keep], saved)
        stats.evaluated_tokens += keep
        return emitted

    def roll_back(self, base: int, kept: list[int], saved: Any) -> None:
        """Make memory hold its first ``base`` tokens + ``kept`` after a verification evaluated more.

        ``saved`` is the state copy taken before the pass ("partial-state", "full-state"), else None.
        """
        memory = self._memory
        if self.rollback in ("truncate", "snapshots"):
            if memory.truncate(base + len(kept)):
                return
        elif saved is not None:
            if self.rollback == "partial-state":
                ok = memory.restore_partial(saved, base)
            else:
                ok = memory.restore_state(saved, base)
            if ok and memory.decode(kept) == 0:
                self.counters.reevaluated_tokens += len(kept)
                return
        # Could not roll back: start over; the next turn re-evaluates its history (slow, correct).
        self.counters.rollback_failures += 1
        memory.reset()
