"""Prompt-lookup drafting: propose the tokens that followed the latest earlier copy of the suffix.

The agent's calls and SQL copy table names, column names and values from tool results and
earlier turns, text already in the episode's own token ids.  The drafter keeps, for every n-gram
length from ``max_n`` down to ``min_n``, the position right after the latest earlier occurrence
of each n-gram; the longest n-gram that ends the history and occurred before proposes the tokens
that followed it (vLLM's and llama.cpp's "prompt lookup" / ``ngram`` drafting).  No match, no
draft: text that copies nothing costs one dictionary lookup per n-gram length and token.

Hand-written rather than borrowed: llama.cpp's own ``common_ngram`` drafting lives in its C++
``common`` library, which llama-cpp-python does not expose, and vLLM's is tied to its scheduler.
"""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_MAX_N = 4
DEFAULT_MIN_N = 2


class NgramDrafter:
    """Incremental n-gram index over one growing token history (the caller appends, never edits)."""

    def __init__(self, max_n: int = DEFAULT_MAX_N, min_n: int = DEFAULT_MIN_N) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError(f"need 1 <= min_n <= max_n, got {min_n}, {max_n}")
        self.max_n = max_n
        self.min_n = min_n
        self._follow: dict[int, dict[tuple[int, ...], int]] = {}
        self._indexed = 0
        self.reset()

    def reset(self) -> None:
        """Forget the history (a new episode)."""
        # One index per n: n-gram -> position right after its latest occurrence that has a successor.
        self._follow = {n: {} for n in range(self.min_n, self.max_n + 1)}
        self._indexed = 0  # n-grams ending before this position are indexed

    def _index(self, tokens: Sequence[int]) -> None:
        """Index every n-gram that has a successor in ``tokens`` (all but the one ending it)."""
        end = len(tokens) - 1
        for last in range(max(self._indexed, 0), end):
            for n in range(self.min_n, self.max_n + 1):
                start = last - n + 1
                if start >= 0:
                    self._follow[n][tuple(tokens[start : last + 1])] = last + 1
        self._indexed = max(self._indexed, end)

    def propose(self, tokens: Sequence[int], k: int) -> tuple[list[int], int]:
        """Up to ``k`` tokens likely to follow ``tokens``, and the n of the match (0: no draft).

        ``tokens`` must extend what earlier calls saw (the index is built incrementally).
        """
        if len(tokens) < self._indexed + 1:
            self.reset()  # a shorter history (rewound): start over
        self._index(tokens)
        if k <= 0:
            return [], 0
        size = len(tokens)
        for n in range(min(self.max_n, size), self.min_n - 1, -1):
            at = self._follow[n].get(tuple(tokens[size - n :]))
            if at is not None:
                # A match whose continuation runs into the end of the history overlaps the
                # suffix itself: the text is periodic from there, so the draft continues the period.
                draft: list[int] = []
                for i in range(k):
                    j = at + i
                    draft.append(tokens[j] if j < size else draft[j - size])
                return draft, n
        return [], 0


class AdaptiveDraftLength:
    """How many tokens to draft next, from how the last verifications went.

    Doubling after a fully accepted draft and falling back to one past the accepted length after
    a rejection keeps the verification pass short where drafts break early and long inside long
    copies.  ``sizes`` restricts the lengths to those whose verification pass is cheap on this
    CPU build: llama.cpp multiplies Q4_K weights four rows at a time (GEMM) and every row left
    over by a separate GEMV, so a pass over 4 tokens (3 drafts + the pending one) costs far
    less than one over 3 or 5 (``benchmarks/speculative.py``).
    """

    def __init__(self, k_max: int = 8, k_start: int = 4, sizes: tuple[int, ...] | None = None) -> None:
        self.k_max = max(1, k_max)
        self.sizes = tuple(sorted(s for s in (sizes or range(1, self.k_max + 1)) if 1 <= s <= self.k_max))
        if not self.sizes:
            raise ValueError("no draft size within 1..k_max")
        self._want = max(1, min(k_start, self.k_max))

    @property
    def minimum(self) -> int:
        """Drafts shorter than this are not worth a verification pass."""
        return self.sizes[0]

    @property
    def k(self) -> int:
        """The largest allowed size not above the adaptive target (the smallest allowed at least)."""
        fitting = [s for s in self.sizes if s <= self._want]
        return fitting[-1] if fitting else self.sizes[0]

    def update(self, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        if accepted >= drafted:
            self._want = min(self.k_max, max(self._want, drafted) * 2)
        else:
            self._want = max(1, min(self.k_max, accepted + 1))
