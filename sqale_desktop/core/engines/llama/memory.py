"""What the llama.cpp context holds, token for token: decode, snapshots, prefill, caches, checkpoints.

:class:`Memory` is the one owner of sequence 0 of a loaded context.  It knows exactly which ids
are evaluated (``tokens``) and keeps that true through every way the memory changes: a decode,
a prefill chunk stopped by the abort callback (restored from the snapshot taken before it), a
failure (cleared), a restore.  Everything above it (sessions, speculation) asks it to evaluate
ids and never touches the context itself.

Across episodes: every episode starts with the same system turn, so the state right after its
``<|im_end|>`` is snapshotted once and restored when a new history starts with the same ids
(the reused count is returned by :meth:`Memory.ensure_evaluated`; those tokens are not counted
as evaluated).  :meth:`Memory.warm` makes that snapshot before any episode (the engine's
``warm_up``), and :meth:`Memory.install_prefix` puts one back that ``prefix_store`` kept on disk
from an earlier launch; the first episode then finds the system turn already in memory and
counts it as reused too.

Cancellation: a prefill runs in ``n_batch`` chunks with the flag checked between chunks, and
llama.cpp's abort callback stops a running chunk within milliseconds.  An aborted decode leaves
a hybrid model's memory inconsistent, so the sequence state is snapshotted
(``llama_state_seq_get_data``, a few ms) before each chunk and restored after an abort: a
cancel loses at most the chunk it interrupted.
"""

from __future__ import annotations

import ctypes
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from sqale_desktop.core.engines.base import EngineError, EngineStats
from sqale_desktop.core.engines.llama.speculative import FloatArray
from sqale_desktop.core.engines.llama.thread_governor import ThreadGovernor

# System turns shorter than this are cheaper to evaluate than to keep a snapshot of.
_MIN_CACHED_PREFIX = 32
_DECODE_ABORTED = 2
_STATE_PARTIAL_ONLY = 1  # LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: only the recurrent part of a hybrid memory


@dataclass
class Counters:
    """What went unusually, kept by the engine across loads (benchmarks and tests read them)."""

    # Prefill chunks stopped by the abort callback (each one rolled back from a snapshot).
    aborted_chunks: int = 0
    # Accepted tokens evaluated again after a state-copy rollback.
    reevaluated_tokens: int = 0
    # Rollbacks that failed and cleared memory (the next turn re-evaluates its history).
    rollback_failures: int = 0


@dataclass(frozen=True)
class Checkpoint:
    """A point in a session's history plus the model state that held then (see ``rewind``)."""

    length: int
    evaluated: list[int]
    snapshot: Any


class _LogitsBatch:
    """A ``llama_batch`` with logits at every position, for verification passes (freed by ``close``)."""

    def __init__(self, lib: Any, size: int) -> None:
        self._lib = lib
        self.size = size
        self.batch: Any = lib.llama_batch_init(size, 0, 1)

    def fill(self, tokens: list[int], start: int) -> Any:
        batch = self.batch
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1
        batch.n_tokens = len(tokens)
        return batch

    def close(self) -> None:
        if self.batch is not None:
            self._lib.llama_batch_free(self.batch)
            self.batch = None


class Memory:
    """Sequence 0 of a loaded context, kept token-exact.  One owner thread (the engine's)."""

    def __init__(
        self,
        lib: Any,
        ctx: Any,
        *,
        n_ctx: int,
        n_batch: int,
        n_threads: int,
        n_vocab: int,
        im_end: int | None,
        governor: ThreadGovernor | None,
        counters: Counters,
        all_logits_batch: int = 0,
    ) -> None:
        self._lib = lib
        self._ctx = ctx
        self.n_ctx = n_ctx
        self.n_batch = n_batch
        self._n_threads = n_threads
        self._n_vocab = n_vocab
        self._im_end = im_end
        self.governor = governor
        self.counters = counters
        self.decode_threads = n_threads
        """Threads the last single-token step ran with (the governor may use fewer than ``n_threads``)."""
        self._tokens: list[int] = []
        # True when the logits of the last evaluated token are still available for sampling.
        self.logits_ready = False
        # (token ids of a system turn, the sequence state right after it), reused across episodes.
        self._prefix: tuple[list[int], Any] | None = None
        # True while memory holds exactly the cached prefix put there by warm/install_prefix and no
        # history has claimed it yet (the first episode counts it as reused).
        self._prefix_fresh = False
        # (ids, the sequence state after them): where a follow-up's prefetch started (the thread,
        # before the fixed start of its next turn), put back when the history evaluated next
        # continues the thread but not what the prefetch added; let go once a history is evaluated.
        self._point: tuple[list[int], Any] | None = None
        self._abort_flag: threading.Event | None = None
        # llama.cpp keeps only the address: the ctypes object must live as long as the context.
        self._abort_cb: Any = lib.ggml_abort_callback(self._should_abort)
        self._logits_batch = _LogitsBatch(lib, all_logits_batch) if all_logits_batch else None
        self._partial_buf: Any = None

    # -- what is held ------------------------------------------------------------------------

    @property
    def tokens(self) -> list[int]:
        """Ids currently in the model's memory (a copy)."""
        return list(self._tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    def close(self) -> None:
        """Free the batch this memory owns and forget the cache (the context is the engine's)."""
        if self._logits_batch is not None:
            self._logits_batch.close()
        self._prefix = None
        self._prefix_fresh = False
        self._point = None
        self._tokens = []
        self.logits_ready = False

    def mark_point(self) -> None:
        """Keep the state after what memory holds now (one snapshot, replacing the last), so that a
        history continuing these ids restores it instead of evaluating them again (a prefetch
        that guessed past them is undone in milliseconds)."""
        self._point = (self.tokens, self.snapshot()) if self._tokens else None

    # -- the cached system turn --------------------------------------------------------------

    def holds_prefix(self, tokens: list[int]) -> bool:
        """Whether the system-turn cache holds the state after exactly ``tokens``."""
        return self._prefix is not None and self._prefix[0] == tokens

    @property
    def prefix_state(self) -> Any:
        """The cached system turn's sequence state (``snapshot()``'s buffer), or None."""
        return self._prefix[1] if self._prefix is not None else None

    def install_prefix(self, tokens: list[int], state: Any) -> bool:
        """Make memory hold ``tokens`` from ``state`` (saved after them) and cache it as the system turn.

        False (memory left empty) when llama.cpp refuses the state: one saved by another build
        or context shape that the key did not tell apart.
        """
        self.reset()
        self._prefix_fresh = False
        self.restore(state, tokens)
        if self._tokens != tokens:
            self.reset()
            return False
        self._prefix = (list(tokens), state)
        self._prefix_fresh = True
        return True

    def warm(self, tokens: list[int], cancel: threading.Event, stats: EngineStats) -> bool:
        """Evaluate exactly ``tokens`` (a system turn) from scratch and cache the state after them.

        Returns False if cancelled (memory then holds what was evaluated, consistently).  When
        the cache already holds these tokens, memory is only restored from it.
        """
        if self.holds_prefix(tokens):
            if self._tokens != tokens:
                self.restore(self.prefix_state, tokens)
            self._prefix_fresh = self._tokens == tokens
            return True
        self.reset()
        self._prefix_fresh = False
        started = time.perf_counter()
        try:
            if not self._prefill(list(tokens), cancel, stats):
                return False
        finally:
            stats.prefill_seconds += time.perf_counter() - started
        snapshot = self.snapshot()
        if snapshot is not None:
            self._prefix = (list(tokens), snapshot)
            self._prefix_fresh = True
        return True

    # -- decoding ------------------------------------------------------------------------------

    def decode(self, tokens: list[int]) -> int:
        """Decode ``tokens`` after what memory holds, logits only for the last; the llama.cpp status.

        Memory's record is extended only on success (by the callers that know what a status means).
        """
        arr = (self._lib.llama_token * len(tokens))(*tokens)
        batch = self._lib.llama_batch_get_one(arr, len(tokens))
        status = int(self._lib.llama_decode(self._ctx, batch))
        if status == 0:
            self._tokens.extend(tokens)
            self.logits_ready = True
        return status

    def decode_all_logits(self, tokens: list[int]) -> int:
        """Decode ``tokens`` after what memory holds with logits at every position; the status.

        Needs the all-logits batch (an engine built to speculate); memory's record is extended on success.
        """
        if self._logits_batch is None or len(tokens) > self._logits_batch.size:
            raise EngineError("this engine was not built to verify drafts of that length")
        batch = self._logits_batch.fill(tokens, len(self._tokens))
        status = int(self._lib.llama_decode(self._ctx, batch))
        if status == 0:
            self._tokens.extend(tokens)
            self.logits_ready = True
        return status

    def logits_row(self, i: int) -> FloatArray:
        """The logits of the ``i``-th position of the last decode (``-1``: its last)."""
        pointer = self._lib.llama_get_logits_ith(self._ctx, i)
        return np.ctypeslib.as_array(pointer, shape=(self._n_vocab,))

    def decode_one(self, token: int, stats: EngineStats) -> None:
        """Evaluate one sampled token (it extends memory by exactly that token).

        With a governor, the step runs with the thread count it picks and reports its time back.
        """
        governor = self.governor
        threads = governor.threads() if governor is not None else self.decode_threads
        if threads != self.decode_threads:
            # Single-token steps use n_threads; prefill and draft verification keep n_threads_batch.
            self._lib.llama_set_n_threads(self._ctx, threads, self._n_threads)
            self.decode_threads = threads
        started = time.perf_counter()
        status = self.decode([token])
        if governor is not None:
            governor.record(threads, time.perf_counter() - started)
        if status != 0:
            self.reset()
            raise EngineError(f"llama_decode failed ({status}) while generating")
        stats.evaluated_tokens += 1

    def sample(self, chain: Any) -> int:
        """One token from ``chain`` (a ``SamplerChain``) at the last position's logits."""
        return int(chain.sample(self._ctx))

    # -- clearing, snapshots, truncation --------------------------------------------------------

    def reset(self) -> None:
        """Clear the context's memory (the only way back for a hybrid model's recurrent state)."""
        mem = self._lib.llama_get_memory(self._ctx)
        self._lib.llama_memory_clear(mem, True)
        self._prefix_fresh = False
        self._tokens = []
        self.logits_ready = False

    def snapshot(self) -> Any:
        """The whole sequence state (grows with the context), or None when llama.cpp could not copy it."""
        size = int(self._lib.llama_state_seq_get_size(self._ctx, 0))
        buf = (ctypes.c_uint8 * size)()
        written = int(self._lib.llama_state_seq_get_data(self._ctx, buf, size, 0))
        return buf if written == size else None

    def restore(self, snapshot: Any, tokens: list[int]) -> None:
        """Make memory hold ``tokens`` from ``snapshot`` (taken when it held them); empty if that fails."""
        mem = self._lib.llama_get_memory(self._ctx)
        self._lib.llama_memory_clear(mem, True)
        self.logits_ready = False
        if snapshot is not None and tokens:
            ok = int(self._lib.llama_state_seq_set_data(self._ctx, snapshot, len(snapshot), 0))
            if ok:
                self._tokens = list(tokens)
                return
        self._tokens = []

    def partial_snapshot(self) -> Any:
        """The recurrent part of the state only (its size does not grow with the context)."""
        size = int(self._lib.llama_state_seq_get_size_ext(self._ctx, 0, _STATE_PARTIAL_ONLY))
        if self._partial_buf is None or len(self._partial_buf) != size:
            self._partial_buf = (ctypes.c_uint8 * size)()
        written = int(
            self._lib.llama_state_seq_get_data_ext(self._ctx, self._partial_buf, size, 0, _STATE_PARTIAL_ONLY)
        )
        return self._partial_buf if written == size else None

    def truncate(self, length: int) -> bool:
        """Drop every cell from position ``length`` on; False when the model cannot (recurrent state)."""
        self.logits_ready = False
        mem = self._lib.llama_get_memory(self._ctx)
        if self._lib.llama_memory_seq_rm(mem, 0, length, -1):
            del self._tokens[length:]
            return True
        return False

    def restore_partial(self, saved: Any, length: int) -> bool:
        """Put back a :meth:`partial_snapshot` taken at ``length`` tokens; drop the attention after it."""
        self.logits_ready = False
        restored = self._lib.llama_state_seq_set_data_ext(
            self._ctx, saved, len(saved), 0, _STATE_PARTIAL_ONLY
        )
        # The recurrent state is back at ``length``, so only attention cells go here.
        mem = self._lib.llama_get_memory(self._ctx)
        if bool(restored) and bool(self._lib.llama_memory_seq_rm(mem, 0, length, -1)):
            del self._tokens[length:]
            return True
        return False

    def restore_state(self, saved: Any, length: int) -> bool:
        """Put back a :meth:`snapshot` taken at ``length`` tokens."""
        self.logits_ready = False
        if bool(self._lib.llama_state_seq_set_data(self._ctx, saved, len(saved), 0)):
            del self._tokens[length:]
            return True
        return False

    # -- evaluating a history --------------------------------------------------------------------

    def ensure_evaluated(
        self, history: list[int], cancel: threading.Event, stats: EngineStats, *, keep_point: bool = False
    ) -> tuple[bool, int]:
        """Make memory hold exactly ``history`` with its last logits ready.

        Returns (completed, reused): False if cancelled; how many leading tokens came from the
        system-prompt cache instead of being evaluated.  A pure extension of what memory holds
        evaluates only the new suffix.  Anything else (a new episode, another session) clears
        memory, since the hybrid model's recurrent state cannot be truncated, and evaluates
        everything except a cached system turn.  A point (:meth:`mark_point`) that ``history``
        continues is restored instead; it is let go once a history is evaluated, unless
        ``keep_point`` (the prefetch that marked it).
        """
        if len(history) > self.n_ctx:
            raise EngineError(f"the prompt ({len(history)} tokens) exceeds the context ({self.n_ctx} tokens)")
        held = self._tokens
        fresh, self._prefix_fresh = self._prefix_fresh, False
        point = self._point
        if point is not None and (len(point[0]) > len(history) or history[: len(point[0])] != point[0]):
            self._point = point = None  # memory moves on to another history
        if held == history and self.logits_ready:
            if not keep_point:
                self._point = None
            return True, 0
        reused = 0
        cache_at = 0
        if len(held) >= len(history) or history[: len(held)] != held:
            self.reset()
        elif fresh and self._prefix is not None and held == self._prefix[0]:
            reused = len(held)  # the warmed (or restored) system turn, not evaluated for this history
        if not self._tokens and point is not None and point[1] is not None and len(point[0]) < len(history):
            self.restore(point[1], point[0])  # held as if nothing had been prefetched
        if not self._tokens:
            reused = self._restore_prefix(history)
            if not reused:
                cache_at = self._system_turn_end(history)
        todo = history[len(self._tokens) :]
        started = time.perf_counter()
        try:
            completed = self._prefill(todo, cancel, stats, cache_at)
        finally:
            stats.prefill_seconds += time.perf_counter() - started
        if completed and not keep_point:
            self._point = None  # (a cancelled follow-up may still need it)
        return completed, reused

    def checkpoint(
        self, history: list[int], cancel: threading.Event, stats: EngineStats
    ) -> tuple[Checkpoint, int]:
        """A checkpoint of ``history`` (right after a user turn) and the tokens reused making it.

        Evaluates ``history`` except its last token (which ``generate`` evaluates to get fresh
        logits), then keeps one state snapshot (a few ms, tens of MB at long contexts);
        :meth:`rewind` restores it instead of re-evaluating the prompt.  When memory already
        holds the whole history, no snapshot can serve (the logits would be missing) and
        rewinding falls back to re-evaluating.
        """
        target = history[:-1]
        if not target or self._tokens == history:
            return Checkpoint(len(history), [], None), 0
        completed, reused = self.ensure_evaluated(target, cancel, stats)
        if not completed:
            return Checkpoint(len(history), [], None), reused
        return Checkpoint(len(history), self.tokens, self.snapshot()), reused

    def rewind(self, checkpoint: Checkpoint) -> None:
        """Memory as it was at ``checkpoint`` (or empty, re-evaluated by the next turn)."""
        self.restore(checkpoint.snapshot, checkpoint.evaluated)

    def _system_turn_end(self, history: list[int]) -> int:
        """Length of the leading system turn (through its ``<|im_end|>``), 0 when not worth caching.

        Every episode starts with the same system prompt (a thousand tokens or more, tens of
        seconds of prefill on two cores), so its state is snapshotted once and restored later.
        """
        if self._im_end is None or self._im_end not in history:
            return 0
        end = history.index(self._im_end) + 1
        return end if _MIN_CACHED_PREFIX <= end < len(history) else 0

    def _restore_prefix(self, history: list[int]) -> int:
        cached = self._prefix
        if cached is None:
            return 0
        tokens, snapshot = cached
        if len(tokens) >= len(history) or history[: len(tokens)] != tokens:
            return 0
        self.restore(snapshot, tokens)
        return len(self._tokens)

    def _should_abort(self, _data: Any) -> bool:
        flag = self._abort_flag
        return flag is not None and flag.is_set()

    def _prefill(
        self, todo: list[int], cancel: threading.Event, stats: EngineStats, cache_at: int = 0
    ) -> bool:
        """Evaluate ``todo`` in ``n_batch`` chunks; an abort loses at most the chunk it interrupted.

        With ``cache_at`` (a from-scratch prefill), a chunk boundary falls there and the state at
        that point is kept as the system-prompt cache.
        """
        if cache_at:
            head, tail = todo[:cache_at], todo[cache_at:]
        else:
            head, tail = [], todo
        chunks = [head[i : i + self.n_batch] for i in range(0, len(head), self.n_batch)]
        chunks += [tail[i : i + self.n_batch] for i in range(0, len(tail), self.n_batch)]
        self._abort_flag = cancel
        self._lib.llama_set_abort_callback(self._ctx, self._abort_cb, None)
        try:
            for chunk in chunks:
                if cancel.is_set():
                    return False
                if cache_at and len(self._tokens) == cache_at:
                    self._prefix = (list(self._tokens), self.snapshot())
                before = list(self._tokens)
                snapshot = self.snapshot() if before else None
                status = self.decode(chunk)
                if status == _DECODE_ABORTED:
                    self.counters.aborted_chunks += 1
                    self.restore(snapshot, before)
                    return False
                if status != 0:
                    self.reset()
                    raise EngineError(f"llama_decode failed ({status}) while evaluating the prompt")
                stats.evaluated_tokens += len(chunk)
        finally:
            self._abort_flag = None
            self._lib.llama_set_abort_callback(self._ctx, self._lib.ggml_abort_callback(0), None)
        return True
