"""The in-process llama.cpp engine: a GGUF loaded once, episodes kept as token ids.

Why token level: re-tokenizing sampled text does not always give the sampled ids back, and
Qwen3.5 is a hybrid model whose recurrent state llama.cpp cannot roll back, so any mismatch
between the prompt and what is already evaluated costs a full re-evaluation (minutes at 12k
tokens).  A session therefore holds the exact ids: the sampled ones (end-of-turn token included)
and each appended text tokenized on its own.  Before sampling, the engine evaluates only what
its memory lacks; ``EngineStats.evaluated_tokens`` counts every token the model actually ran.

Threads: a ``llama_cpp.Llama`` context is not thread-safe.  This engine does not own a thread:
the caller (the UI's long-lived model worker, or the CLI's main thread) must use an engine and
its sessions from one thread at a time.  Misuse is caught, not tolerated: entering the engine
while another thread is inside it raises ``RuntimeError``.  Only ``cancel`` (a
``threading.Event``) is meant to be touched from other threads.  An owner-thread executor was
rejected because the episode loop is itself a generator that must run on the same thread as
the tools' SQLite connection; wrapping the engine in another thread would add a hand-off per
token for nothing.

Cancellation: checked between sampled tokens; a prefill runs in ``n_batch`` chunks with the
flag checked between chunks, and llama.cpp's abort callback stops a running chunk within
milliseconds.  An aborted decode leaves this model's memory inconsistent, so the sequence state
is snapshotted (``llama_state_seq_get_data``, a few ms) before each chunk and restored after an
abort: a cancel loses at most the chunk it interrupted.

Across episodes: every episode starts with the same system turn, so the state right after its
``<|im_end|>`` is snapshotted once and restored when a new session starts with the same ids
(``LlamaSession.reused_tokens`` counts them; they are not in ``evaluated_tokens``).

Threads and waiting: ``thread_policy`` gives OpenMP threads a short bounded spin at barriers
(set on import of this module, before llama.cpp loads), and with "Automatic" threads a
``thread_governor`` picks each single-token step's thread count from the step times, dropping to
one thread fewer while another program takes a core; see those modules for the measurements.

Speculative decoding (``speculation="on"``/``"auto"``): an n-gram drafter over the episode's own
ids (``ngram_draft``) proposes up to k tokens; the pending sampled token and the draft are
evaluated in ONE ``llama_decode`` with logits at every position (``verify_draft``); exact
speculative sampling (``speculative``) accepts a prefix and draws one more token, so the output
has the sampler chain's distribution, and greedy output is the plain greedy output.  Flash
attention is turned on for such engines: without it llama.cpp's CPU attention gives a token
evaluated in a batch of three or more different logits than the same token decoded alone (up
to 1.0 on SmolLM2, which broke greedy equality); with it SmolLM2 and the tiny qwen35 agree bit
for bit with one thread.  With more threads and 512+ tokens in memory llama.cpp splits a single
token's attention over the threads (``use_split_kv_path`` in ggml-cpu ``ops.cpp``) and sums in
another order than the batched kernel: rounding-level differences that can flip a greedy
near-tie (seen on SmolLM2 at 2 threads).  Q4_K_M weights are also multiplied by another
kernel for batches of 4+ rows (repacked GEMM vs GEMV), so on the 2B-shaped file a verified
token's logits differ from a decoded one's by ~0.2: the same kind of difference as between
prefilled and decoded tokens, which the plain path already has.

Rolling back after a rejection.  The hybrid model's recurrent state cannot be truncated by
``llama_memory_seq_rm``.  Measured ways (``benchmarks/speculative.py``, 2B shape, 2 threads):
- "snapshots": llama.cpp 0.3.36's own per-token recurrent snapshots (context parameter
  ``n_rs_seq``, experimental, qwen35 is on its list; ``Llama`` does not expose it, see
  ``_context_fields``).  A rejection is then a plain ``seq_rm``: 0.03 ms, no copy, no
  re-evaluation.  Costs: the recurrent state is kept (1 + n_rs_seq) times (19 MiB each on the
  2B shape) and each pass writes the per-token snapshots.
- "partial-state": copy only the recurrent part of the state before each verification
  (``llama_state_seq_get_data_ext`` with ``PARTIAL_ONLY``, constant size), and on rejection
  restore it, drop the attention cells with ``seq_rm`` and re-evaluate the accepted tokens:
  a rejection costs 86-126 ms, about one decode step.
- "full-state": the same with the whole sequence state (grows with the context): 134-183 ms.
- "seq-copy", measured in the benchmark but not built into the engine: ``seq_cp`` to a second
  sequence (``n_seq_max=2``, unified KV cache), verify there, ``seq_rm`` it; the copy and the
  removal cost 0.14 ms, but the original sequence never saw the accepted tokens, so a rejection
  re-evaluates them there: 59-64 ms, about one decode step, like "partial-state", plus a second
  recurrent state in memory; and a plain step in such a two-sequence context took 64 ms
  against 50 (estimate 1.11x on call/SQL against 1.18x for "snapshots").
"snapshots" is used where llama.cpp grants it (``llama_n_rs_seq`` after loading), otherwise
"partial-state"; attention-only models simply truncate.  All three are checked against a fresh
evaluation of the same ids in ``tests/core/engines/test_llama_speculative.py``.

Does it pay here?  Not on this 2-core CPU (hence the setting's default, off): the 2B-shaped
Q4_K_M decode is compute-bound (prefill ~60 tok/s vs decode ~20 on a quiet machine), so a pass
over n tokens costs roughly n GEMV-rows of compute except in 4-row GEMM groups.  Quiet machine:
a plain step 49-52 ms, a pass over 2 tokens 86-97 ms (1.8-1.9x), over 4 tokens (3 drafts +
pending) 133-144 ms (2.7-2.8x), over 8 tokens 7-8x; on a shared machine the 4-token ratio
ranged 1.6-3.1x.  With the drafter's teacher-forced acceptance on the published episodes
(call/SQL: 62 % of tokens drafted correctly, 2.3 accepted per 3-token verification) that
estimates 1.17x on call/SQL and 0.85x on thinking text (targets 1.3x and 0.98x); SmolLM2 end to
end measured 1.30x quiet (1.09-1.22x shared).  On hardware
where decoding is memory-bound (a GPU, a wide CPU) a verification costs about one step and
the same drafts pay in full.
Invariants kept: memory always holds the history minus its final sampled token; a
verification's tokens are emitted as a unit (Stop is honoured between units, and a
verification is never aborted midway), budgets cap the draft so a turn ends at exactly the
same token count, an end-of-generation token inside accepted drafts ends the turn there,
unevaluated.  ``evaluated_tokens`` counts tokens kept in memory; ``drafted_tokens`` and
``accepted_tokens`` say how drafting went.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from sqale_desktop.core.engines import offload, speculative, thread_policy
from sqale_desktop.core.engines.base import (
    EngineError,
    EngineInfo,
    EngineStats,
    FinishReason,
    GpuLayers,
    SamplingParams,
    Speculation,
)
from sqale_desktop.core.engines.cpu_info import physical_cores
from sqale_desktop.core.engines.llama_sampler import SamplerChain
from sqale_desktop.core.engines.ngram_draft import AdaptiveDraftLength, NgramDrafter
from sqale_desktop.core.engines.thread_governor import ThreadGovernor
from sqale_desktop.core.units import MIB, format_bytes

# Before llama_cpp (and libgomp) can load: nothing in this module imports it at the top.
_POLICY_NOTE = thread_policy.apply()

Rollback = Literal["auto", "snapshots", "partial-state", "full-state"]

_ALL_LAYERS = -1
# System turns shorter than this are cheaper to evaluate than to keep a snapshot of.
_MIN_CACHED_PREFIX = 32
# Reading the model file ahead of llama.cpp, in blocks this size, is what the load progress shows.
_READ_BLOCK = 16 * MIB
# Share of the progress bar for reading the file; the rest is llama.cpp building the model.
_READ_SHARE = 0.9

LoadProgress = Callable[[float], None]
"""Called with the fraction of loading done, 0.0 to 1.0, on the loading thread."""
_DECODE_ABORTED = 2
_STATE_PARTIAL_ONLY = 1  # LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: only the recurrent part of a hybrid memory
# Draft lengths to verify: 3 drafts + the pending token fill one 4-row GEMM of llama.cpp's
# repacked Q4_K kernels (see ngram_draft.AdaptiveDraftLength and benchmarks/speculative.py).
DRAFT_SIZES: tuple[int, ...] = (3,)
# Auto speculation judges a segment after this many verifications.
_AUTO_MIN_VERIFICATIONS = 4


@contextlib.contextmanager
def _context_fields(module: Any, **fields: Any) -> Iterator[None]:
    """Context parameters ``llama_cpp.Llama`` does not expose (``n_rs_seq``), set while it builds one.

    ``Llama`` starts from ``llama_context_default_params()`` and overwrites only the fields it
    knows; wrapping that function for the duration of the constructor is the one way in
    without rebuilding the context by hand.  Loading happens on the engine's owner thread.
    """
    original = module.llama_context_default_params

    def patched() -> Any:
        params = original()
        for name, value in fields.items():
            setattr(params, name, value)
        return params

    module.llama_context_default_params = patched
    try:
        yield
    finally:
        module.llama_context_default_params = original


def gpu_layer_attempts(
    requested: GpuLayers, supports_offload: bool, n_layers: int | None, fit: int | None = None
) -> list[int]:
    """The ``n_gpu_layers`` values to try in order, ending on the CPU (0).

    "auto" offloads what fits (``fit``, from :func:`offload.layers_that_fit`; ``n_layers + 1`` or
    None means everything); "all" and a number are taken as asked.  When loading with offload
    fails (not enough GPU memory, driver trouble), fewer layers are tried, then none.  "none" is 0.
    """
    if not supports_offload or requested == "none":
        return [0]
    if requested == "auto" and fit is not None and n_layers is not None and fit <= n_layers:
        first = fit
    else:
        first = _ALL_LAYERS if requested == "auto" or requested == "all" else int(requested)
    if first == 0:
        return [0]
    attempts = [first]
    layers = n_layers if first < 0 else first
    if layers:
        half = layers // 2
        while half >= 1:
            attempts.append(half)
            half //= 2
    attempts.append(0)
    return attempts


def _rss_bytes() -> tuple[int, int]:
    """(resident, file-backed resident) bytes of this process on Linux; zeros where unknown.

    The file-backed part is the memory-mapped GGUF: page cache the kernel can reclaim and
    re-read, unlike the anonymous part (KV cache, recurrent state, compute buffers, repacked
    weights).
    """
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 0, 0
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)

    def kib(name: str) -> int:
        try:
            return int(fields.get(name, "0 kB").split()[0]) * 1024
        except (ValueError, IndexError):
            return 0

    return kib("VmRSS"), kib("RssFile")


@dataclass
class _Memory:
    """What the context's memory holds: the token ids evaluated, in order, for sequence 0."""

    tokens: list[int]
    # True when the logits of the last evaluated token are still available for sampling.
    logits_ready: bool = False


class LlamaEngine:
    """A GGUF model loaded in-process through llama-cpp-python.  Implements ``base.Engine``."""

    name = "llama"

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 16384,
        n_gpu_layers: GpuLayers = "auto",
        n_threads: int | None = None,
        n_ubatch: int = 128,
        n_batch: int = 512,
        verbose: bool = False,
        gpu_memory_limit: int | None = None,
        speculation: Speculation = "off",
        draft_sizes: tuple[int, ...] = DRAFT_SIZES,
        rollback: Rollback = "auto",
        adapt_threads: bool | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        # Device bytes "auto" may plan for, below what the device reports free (tests, shared cards).
        self.gpu_memory_limit = gpu_memory_limit
        self.offload_device: offload.OffloadDevice | None = None
        self.device_bytes = 0
        # True when loading with more GPU layers failed and fewer (or none) were used.
        self.offload_failed = False
        self.n_ctx = n_ctx
        self.requested_gpu_layers: GpuLayers = n_gpu_layers
        self.n_threads = n_threads or physical_cores()
        # "Automatic" threads also adapt while decoding (thread_governor); a number the user set stays fixed.
        self.adapt_threads = n_threads is None if adapt_threads is None else adapt_threads
        self.governor: ThreadGovernor | None = None
        self._decode_threads = self.n_threads
        self.n_ubatch = n_ubatch
        self.n_batch = max(n_batch, n_ubatch)
        self.verbose = verbose
        self.notes: list[str] = []
        self.gpu_layers = 0
        self.resident_bytes = 0
        # Prefill chunks stopped by the abort callback (each one rolled back from a snapshot).
        self.aborted_chunks = 0
        self._llama: Any = None
        self._lib: Any = None
        self._memory = _Memory(tokens=[])
        self._guard = threading.Lock()
        self._owner: int | None = None
        self._depth = 0
        self._vocab: Any = None
        self._n_vocab = 0
        self._add_bos = False
        self._bos = 0
        self.im_end: int | None = None
        self.endoftext: int | None = None
        self.weights_bytes = 0
        self._pieces: dict[int, bytes] = {}
        # (token ids of a system turn, the sequence state right after it), reused across episodes.
        self._prefix: tuple[list[int], Any] | None = None
        self._abort_flag: threading.Event | None = None
        self._abort_cb: Any = None
        # Speculative decoding (see LlamaSession.generate and verify_draft).
        self.speculation: Speculation = speculation
        self.draft_sizes = tuple(sorted({max(1, k) for k in draft_sizes})) or DRAFT_SIZES
        self.draft_max = self.draft_sizes[-1]
        self.requested_rollback: Rollback = rollback
        # How rejected drafts leave memory: "truncate" (attention-only model), "snapshots"
        # (llama.cpp's per-token recurrent snapshots, n_rs_seq), "partial-state" / "full-state"
        # (restore a state copy, then re-evaluate the accepted tokens).
        self.rollback_method = ""
        self.reevaluated_tokens = 0
        self.rollback_failures = 0
        self.think_end: int | None = None
        self._batch: Any = None
        self._partial_buf: Any = None
        # Moving average of one plain decode step (decode + sample), seconds; auto mode compares with it.
        self.plain_step_s = 0.0
        if _POLICY_NOTE:
            self.notes.append(_POLICY_NOTE)

    # -- loading ---------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._llama is not None

    def load(self, progress: LoadProgress | None = None) -> EngineInfo:
        """Load the model now (otherwise the first session does); retries with fewer GPU layers.

        With ``progress``, the file is first read through once in blocks, reporting how far it got:
        llama.cpp maps the file and offers no progress of its own through llama-cpp-python, and
        on a cold disk reading the weights is most of the wait (and otherwise lands on the first
        question, as page faults).
        """
        with self._entered():
            self._load(progress)
        return self.info()

    def _load(self, progress: LoadProgress | None = None) -> None:
        if self._llama is not None:
            return
        if not self.model_path.is_file():
            raise EngineError(f"model file not found: {self.model_path}")
        if progress is not None:
            _read_through(self.model_path, lambda fraction: progress(fraction * _READ_SHARE))
        import llama_cpp

        self._lib = llama_cpp
        supports = bool(llama_cpp.llama_supports_gpu_offload())
        devices = offload.offload_devices() if supports else []
        if supports and devices == []:
            # A GPU build on a machine without a usable device: llama.cpp would run on the CPU anyway.
            supports = False
        device = offload.combined(devices or [])
        # One read of the header (seconds on a large file): how many layers "all" means, and for
        # "auto" what each costs on the device.
        footprint = offload.read_footprint(self.model_path) if supports else None
        attempts = gpu_layer_attempts(
            self.requested_gpu_layers,
            supports,
            footprint.n_layers if footprint is not None else None,
            self._layers_that_fit(device, footprint),
        )
        rss_before, file_before = _rss_bytes()
        errors: list[str] = []
        snapshots = self.speculation != "off" and self.requested_rollback in ("auto", "snapshots")
        extra = {"n_rs_seq": self.draft_max} if snapshots else {}
        report = offload.BufferReport()
        for layers in attempts:
            try:
                with offload.buffer_report() as report, _context_fields(llama_cpp.llama_cpp, **extra):
                    self._llama = llama_cpp.Llama(
                        str(self.model_path),
                        n_ctx=self.n_ctx,
                        n_batch=self.n_batch,
                        n_ubatch=self.n_ubatch,
                        n_threads=self.n_threads,
                        n_threads_batch=self.n_threads,
                        n_gpu_layers=layers,
                        # Exactness: without flash attention, llama.cpp's CPU attention gives a
                        # token evaluated in a batch of 3+ other logits than the same token
                        # decoded alone (up to 1.0 on SmolLM2); with it they are bit-identical.
                        flash_attn=self.speculation != "off",
                        verbose=self.verbose,
                    )
            except (ValueError, RuntimeError, OSError) as exc:
                errors.append(f"n_gpu_layers={layers}: {exc}")
                continue
            break
        if self._llama is None:
            raise EngineError(f"could not load {self.model_path.name}: " + "; ".join(errors))
        if progress is not None:
            progress(1.0)
        n_layers = int(llama_cpp.llama_model_n_layer(self._llama.model))
        chosen = attempts[len(errors)]
        self._decode_threads = self.n_threads
        self.governor = ThreadGovernor(self.n_threads) if self.adapt_threads and self.n_threads > 1 else None
        self.gpu_layers = 0 if not supports else (n_layers if chosen < 0 else min(chosen, n_layers))
        self.device_bytes = report.device_bytes()
        if self.gpu_layers and report.buffers and not report.device_bytes(frozenset({"model"})):
            # llama.cpp falls back to host memory for weights a device buffer cannot take; then
            # nothing was offloaded whatever n_gpu_layers said, and the status line must not claim it.
            asked = self.gpu_layers
            self.notes.append(f"llama.cpp kept all weights in host memory (asked for {asked} GPU layers)")
            self.gpu_layers = 0
        self.offload_device = device if self.gpu_layers else None
        self.offload_failed = bool(errors)
        if errors:
            where = f"{self.gpu_layers} GPU layers" if self.gpu_layers else "the CPU"
            self.notes.append(f"loading with more GPU layers failed ({errors[-1]}); loaded on {where}")
        if not supports and self.requested_gpu_layers not in ("auto", "none", 0):
            self.notes.append("this llama-cpp-python build cannot offload to a GPU; running on the CPU")
        if device is not None and self.gpu_layers:
            self.notes.append(
                f"{self.gpu_layers} of {n_layers} layers on {device.name} ({device.description}); "
                f"llama.cpp allocated {format_bytes(self.device_bytes)} there "
                f"({format_bytes(device.free_bytes)} were free)"
            )
        self._vocab = llama_cpp.llama_model_get_vocab(self._llama.model)
        self._n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        self._add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        self._bos = int(llama_cpp.llama_vocab_bos(self._vocab))
        self.im_end = self._special_id("<|im_end|>")
        self.endoftext = self._special_id("<|endoftext|>")
        self.think_end = self._special_id("</think>")
        self.rollback_method = self._choose_rollback()
        self._batch = llama_cpp.llama_batch_init(self.draft_max + 1, 0, 1)
        self._abort_cb = llama_cpp.ggml_abort_callback(self._should_abort)
        self.weights_bytes = int(llama_cpp.llama_model_size(self._llama.model))
        rss_after, file_after = _rss_bytes()
        grown = rss_after - rss_before
        self.resident_bytes = grown if grown > 0 else self.weights_bytes
        if grown > 0:
            mapped = max(file_after - file_before, 0)
            self.notes.append(
                f"resident after load: {format_bytes(grown)}, of which {format_bytes(mapped)} is the "
                f"memory-mapped model file ({format_bytes(self.weights_bytes)} of weights)"
            )

    def _choose_rollback(self) -> str:
        lib, model = self._lib, self._llama.model
        if not (lib.llama_model_is_hybrid(model) or lib.llama_model_is_recurrent(model)):
            return "truncate"
        if int(lib.llama_n_rs_seq(self._llama.ctx)) >= self.draft_max:
            return "snapshots"
        return "full-state" if self.requested_rollback == "full-state" else "partial-state"

    def _special_id(self, text: str) -> int | None:
        ids = self._llama.tokenize(text.encode(), add_bos=False, special=True)
        return int(ids[0]) if len(ids) == 1 else None

    def _require(self) -> None:
        if self._llama is None:
            self._load()

    @contextlib.contextmanager
    def _entered(self) -> Iterator[None]:
        """Mark the engine busy for this thread; another thread entering meanwhile is a bug."""
        me = threading.get_ident()
        with self._guard:
            if self._owner is not None and self._owner != me:
                raise RuntimeError("LlamaEngine used from two threads at once; it must have one owner thread")
            self._owner = me
            self._depth += 1
        try:
            yield
        finally:
            with self._guard:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = None

    # -- Engine protocol -------------------------------------------------------------------

    def _layers_that_fit(
        self, device: offload.OffloadDevice | None, footprint: offload.ModelFootprint | None
    ) -> int | None:
        """For "auto": the layers whose weights, KV and recurrent state fit the device's free memory."""
        if device is None or footprint is None or self.requested_gpu_layers != "auto":
            return None
        free = device.free_bytes
        if self.gpu_memory_limit is not None:
            free = min(free, self.gpu_memory_limit)
        fit = offload.layers_that_fit(footprint, self.n_ctx, free)
        if fit <= footprint.n_layers:
            whole = footprint.layers_bytes(footprint.n_layers, self.n_ctx)
            self.notes.append(
                f"auto: {fit} of {footprint.n_layers} layers fit in {format_bytes(free)} of {device.name} "
                f"(the whole model needs about {format_bytes(whole)} at n_ctx {self.n_ctx})"
            )
        return fit

    def describe(self) -> str:
        """The status line: where the model runs, and whether that is less than was asked for."""
        if self.gpu_layers:
            where = f" on {self.offload_device.name}" if self.offload_device is not None else ""
            fewer = "; more failed to load" if self.offload_failed else ""
            return f"local GPU ({self.gpu_layers} layers{where}{fewer})"
        return "local CPU (loading on the GPU failed)" if self.offload_failed else "local CPU"

    def info(self) -> EngineInfo:
        return EngineInfo(
            kind=self.name,
            description=self.describe(),
            gpu_layers=self.gpu_layers,
            resident_bytes=self.resident_bytes,
            notes=list(self.notes),
        )

    def chat_template(self) -> str | None:
        with self._entered():
            self._require()
            template = self._llama.metadata.get("tokenizer.chat_template")
        return str(template) if template else None

    def new_session(self, prompt: str) -> LlamaSession:
        """A session whose history starts with ``prompt`` (BOS first only if the model wants one)."""
        with self._entered():
            self._require()
            start = [self._bos] if self._add_bos else []
            return LlamaSession(self, start + self.tokenize(prompt))

    def close(self) -> None:
        """Free the model and context (the engine can be loaded again)."""
        with self._entered():
            if self._llama is not None:
                if self._batch is not None:
                    self._lib.llama_batch_free(self._batch)
                    self._batch = None
                self._llama.close()
                self._llama = None
                self._pieces = {}
                self._prefix = None
            self._memory = _Memory(tokens=[])

    # -- token level helpers (used by sessions, on the owner thread) -----------------------

    def tokenize(self, text: str) -> list[int]:
        """Text tokenized on its own: special tokens parsed, no BOS."""
        return [int(t) for t in self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)]

    def piece(self, token: int) -> bytes:
        """The bytes of one token, special tokens rendered (``<think>`` must reach the prompt text)."""
        cached = self._pieces.get(token)
        if cached is not None:
            return cached
        buf = ctypes.create_string_buffer(64)
        n = self._lib.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self._lib.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True)
        piece = buf.raw[:n]
        self._pieces[token] = piece
        return piece

    def is_eog(self, token: int) -> bool:
        return bool(self._lib.llama_vocab_is_eog(self._vocab, token))

    @property
    def evaluated_tokens(self) -> list[int]:
        """Ids currently in the model's memory (a copy)."""
        return list(self._memory.tokens)

    def _should_abort(self, _data: Any) -> bool:
        flag = self._abort_flag
        return flag is not None and flag.is_set()

    def _decode(self, tokens: list[int]) -> int:
        """Decode ``tokens`` after what memory holds; logits only for the last one."""
        arr = (self._lib.llama_token * len(tokens))(*tokens)
        batch = self._lib.llama_batch_get_one(arr, len(tokens))
        return int(self._lib.llama_decode(self._llama.ctx, batch))

    def _reset_memory(self) -> None:
        mem = self._lib.llama_get_memory(self._llama.ctx)
        self._lib.llama_memory_clear(mem, True)
        self._memory = _Memory(tokens=[])

    def _snapshot(self) -> Any:
        size = int(self._lib.llama_state_seq_get_size(self._llama.ctx, 0))
        buf = (ctypes.c_uint8 * size)()
        written = int(self._lib.llama_state_seq_get_data(self._llama.ctx, buf, size, 0))
        return buf if written == size else None

    def _restore(self, snapshot: Any, tokens: list[int]) -> None:
        mem = self._lib.llama_get_memory(self._llama.ctx)
        self._lib.llama_memory_clear(mem, True)
        if snapshot is not None and tokens:
            ok = int(self._lib.llama_state_seq_set_data(self._llama.ctx, snapshot, len(snapshot), 0))
            if ok:
                self._memory = _Memory(tokens=list(tokens))
                return
        self._memory = _Memory(tokens=[])

    def ensure_evaluated(
        self, history: list[int], cancel: threading.Event, stats: EngineStats
    ) -> tuple[bool, int]:
        """Make memory hold exactly ``history`` with its last logits ready.

        Returns (completed, reused): False if cancelled; how many leading tokens came from the
        system-prompt cache instead of being evaluated.  A pure extension of what memory holds
        evaluates only the new suffix.  Anything else (a new episode, another session) clears
        memory, since the hybrid model's recurrent state cannot be truncated, and evaluates
        everything except a cached system turn.
        """
        if len(history) > self.n_ctx:
            raise EngineError(f"the prompt ({len(history)} tokens) exceeds the context ({self.n_ctx} tokens)")
        held = self._memory.tokens
        if held == history and self._memory.logits_ready:
            return True, 0
        reused = 0
        cache_at = 0
        if len(held) >= len(history) or history[: len(held)] != held:
            self._reset_memory()
        if not self._memory.tokens:
            reused = self._restore_prefix(history)
            if not reused:
                cache_at = self._system_turn_end(history)
        todo = history[len(self._memory.tokens) :]
        started = time.perf_counter()
        try:
            return self._prefill(todo, cancel, stats, cache_at), reused
        finally:
            stats.prefill_seconds += time.perf_counter() - started

    def _system_turn_end(self, history: list[int]) -> int:
        """Length of the leading system turn (through its ``<|im_end|>``), 0 when not worth caching.

        Every episode starts with the same system prompt (a thousand tokens or more, tens of
        seconds of prefill on two cores), so its state is snapshotted once and restored later.
        """
        if self.im_end is None or self.im_end not in history:
            return 0
        end = history.index(self.im_end) + 1
        return end if _MIN_CACHED_PREFIX <= end < len(history) else 0

    def _restore_prefix(self, history: list[int]) -> int:
        cached = self._prefix
        if cached is None:
            return 0
        tokens, snapshot = cached
        if len(tokens) >= len(history) or history[: len(tokens)] != tokens:
            return 0
        self._restore(snapshot, tokens)
        return len(self._memory.tokens)

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
        self._lib.llama_set_abort_callback(self._llama.ctx, self._abort_cb, None)
        try:
            for chunk in chunks:
                if cancel.is_set():
                    return False
                if cache_at and len(self._memory.tokens) == cache_at:
                    self._prefix = (list(self._memory.tokens), self._snapshot())
                before = list(self._memory.tokens)
                snapshot = self._snapshot() if before else None
                status = self._decode(chunk)
                if status == _DECODE_ABORTED:
                    self.aborted_chunks += 1
                    self._restore(snapshot, before)
                    return False
                if status != 0:
                    self._reset_memory()
                    raise EngineError(f"llama_decode failed ({status}) while evaluating the prompt")
                self._memory.tokens.extend(chunk)
                self._memory.logits_ready = True
                stats.evaluated_tokens += len(chunk)
        finally:
            self._abort_flag = None
            self._lib.llama_set_abort_callback(self._llama.ctx, self._lib.ggml_abort_callback(0), None)
        return True

    def decode_one(self, token: int, stats: EngineStats) -> None:
        """Evaluate one sampled token (it extends memory by exactly that token).

        With a governor, the step runs with the thread count it picks and reports its time back.
        """
        governor = self.governor
        threads = governor.threads() if governor is not None else self._decode_threads
        if threads != self._decode_threads:
            # Single-token steps use n_threads; prefill and draft verification keep n_threads_batch.
            self._lib.llama_set_n_threads(self._llama.ctx, threads, self.n_threads)
            self._decode_threads = threads
        started = time.perf_counter()
        status = self._decode([token])
        if governor is not None:
            governor.record(threads, time.perf_counter() - started)
        if status != 0:
            self._reset_memory()
            raise EngineError(f"llama_decode failed ({status}) while generating")
        self._memory.tokens.append(token)
        self._memory.logits_ready = True
        stats.evaluated_tokens += 1

    def _decode_all_logits(self, tokens: list[int]) -> int:
        """Decode ``tokens`` after what memory holds, with logits at every position."""
        batch = self._batch
        base = len(self._memory.tokens)
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = base + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1
        batch.n_tokens = len(tokens)
        return int(self._lib.llama_decode(self._llama.ctx, batch))

    def _logits_row(self, i: int) -> speculative.FloatArray:
        pointer = self._lib.llama_get_logits_ith(self._llama.ctx, i)
        return np.ctypeslib.as_array(pointer, shape=(self._n_vocab,))

    def _partial_snapshot(self) -> Any:
        """The recurrent part of the state only (its size does not grow with the context)."""
        ctx = self._llama.ctx
        size = int(self._lib.llama_state_seq_get_size_ext(ctx, 0, _STATE_PARTIAL_ONLY))
        if self._partial_buf is None or len(self._partial_buf) != size:
            self._partial_buf = (ctypes.c_uint8 * size)()
        written = int(
            self._lib.llama_state_seq_get_data_ext(ctx, self._partial_buf, size, 0, _STATE_PARTIAL_ONLY)
        )
        return self._partial_buf if written == size else None

    def verify_draft(
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
        base = list(self._memory.tokens)
        batch = [last, *draft]
        method = self.rollback_method
        saved: Any = None
        if method == "partial-state":
            saved = self._partial_snapshot()
        elif method == "full-state":
            saved = self._snapshot()
        status = self._decode_all_logits(batch)
        if status != 0:
            self._reset_memory()
            raise EngineError(f"llama_decode failed ({status}) while verifying a draft")
        rows = [self._logits_row(i) for i in range(len(batch))]
        verdict = speculative.verify(draft, rows, params, rng)
        emitted = verdict.tokens
        for i, token in enumerate(emitted):
            if self.is_eog(token):
                emitted = emitted[: i + 1]
                break
        stats.drafted_tokens += len(draft)
        stats.accepted_tokens += min(verdict.accepted, len(emitted))
        keep = len(emitted)  # ``last`` and all emitted tokens but the final one
        self._memory.tokens.extend(batch)
        self._memory.logits_ready = True
        if keep < len(batch):
            self._roll_back(base, batch[:keep], saved)
        stats.evaluated_tokens += keep
        return emitted

    def _roll_back(self, base: list[int], kept: list[int], saved: Any) -> None:
        """Make memory hold ``base + kept`` after a verification evaluated more than that."""
        lib, ctx = self._lib, self._llama.ctx
        mem = lib.llama_get_memory(ctx)
        target = len(base) + len(kept)
        self._memory.logits_ready = False
        if self.rollback_method in ("truncate", "snapshots"):
            if lib.llama_memory_seq_rm(mem, 0, target, -1):
                del self._memory.tokens[target:]
                return
        elif saved is not None:
            if self.rollback_method == "partial-state":
                restored = lib.llama_state_seq_set_data_ext(ctx, saved, len(saved), 0, _STATE_PARTIAL_ONLY)
                # The recurrent state is back before the batch, so only attention cells go here.
                ok = bool(restored) and bool(lib.llama_memory_seq_rm(mem, 0, len(base), -1))
            else:
                ok = bool(lib.llama_state_seq_set_data(ctx, saved, len(saved), 0))
            if ok:
                del self._memory.tokens[len(base) :]
                status = self._decode(kept)
                if status == 0:
                    self._memory.tokens.extend(kept)
                    self._memory.logits_ready = True
                    self.reevaluated_tokens += len(kept)
                    return
        # Could not roll back: start over; the next turn re-evaluates its history (slow, correct).
        self.rollback_failures += 1
        self._reset_memory()

    @property
    def decode_threads(self) -> int:
        """Threads the last single-token step ran with (the governor may use fewer than ``n_threads``)."""
        return self._decode_threads

    def note_plain_step(self, seconds: float) -> None:
        """Fold one plain decode step's time into ``plain_step_s`` (what auto speculation must beat)."""
        self.plain_step_s = seconds if self.plain_step_s <= 0 else 0.9 * self.plain_step_s + 0.1 * seconds

    def sample(self, chain: SamplerChain) -> int:
        token = chain.sample(self._llama.ctx)
        return token

    def sampler(self, params: SamplingParams) -> SamplerChain:
        return SamplerChain(params, self._n_vocab)


class _Drafting:
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

    def record(self, drafted: int, tokens: list[int], seconds: float, engine: LlamaEngine) -> None:
        if drafted:
            self.length.update(drafted, len(tokens) - 1)
            self._seconds += seconds
            self._tokens += len(tokens)
            self._verifications += 1
            plain = engine.plain_step_s
            if (
                self.auto
                and self._verifications >= _AUTO_MIN_VERIFICATIONS
                and plain > 0
                and self._seconds / self._tokens > plain
            ):
                self.paused = True
        if self.segment_end is not None and self.segment_end in tokens:
            self.paused = False
            self._seconds, self._tokens, self._verifications = 0.0, 0, 0


@dataclass(frozen=True)
class Checkpoint:
    """A point in a session's history plus the model state that held then (see ``rewind``)."""

    length: int
    evaluated: list[int]
    snapshot: Any


class LlamaSession:
    """One episode as token ids inside a ``LlamaEngine``.  Implements ``base.EngineSession``.

    ``history`` is authoritative.  The last sampled token (the end-of-turn token, or the last
    one before a length/cancel stop) is not evaluated when sampled; the next ``generate``
    evaluates it first, so a turn boundary costs nothing.
    """

    def __init__(self, engine: LlamaEngine, history: list[int]) -> None:
        self._engine = engine
        self.history: list[int] = history
        self._pieces: list[bytes] = [engine.piece(t) for t in history]
        self._stats = EngineStats(prompt_tokens=len(history))
        self._finish: FinishReason = "stop"
        # Tokens restored from the engine's system-prompt cache rather than evaluated.
        self.reused_tokens = 0
        self._sampled_last = False
        self._closed = False
        self._drafter: NgramDrafter | None = None

    @property
    def prompt_text(self) -> str:
        return b"".join(self._pieces).decode("utf-8", errors="replace")

    @property
    def stats(self) -> EngineStats:
        return self._stats

    @property
    def last_finish_reason(self) -> FinishReason:
        return self._finish

    def _push(self, tokens: list[int]) -> None:
        self.history.extend(tokens)
        self._pieces.extend(self._engine.piece(t) for t in tokens)
        self._stats.prompt_tokens = len(self.history)

    def append(self, text: str) -> None:
        self._check_open()
        with self._engine._entered():
            self._push(self._engine.tokenize(text))
            self._sampled_last = False

    def generate(self, max_tokens: int, sampling: SamplingParams, cancel: threading.Event) -> Iterator[str]:
        """Sample up to ``max_tokens`` tokens, yielding decoded text as soon as it is whole UTF-8."""
        self._check_open()
        engine = self._engine
        with engine._entered():
            self._finish = "cancelled"
            self._sampled_last = False
            completed, reused = engine.ensure_evaluated(self.history, cancel, self._stats)
            self.reused_tokens += reused
            if not completed:
                return
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            chain = engine.sampler(sampling)
            drafting = self._drafting(sampling)
            started = time.perf_counter()
            try:
                produced = 0
                while True:
                    if cancel.is_set():
                        self._finish = "cancelled"
                        break
                    if produced >= max_tokens or len(self.history) >= engine.n_ctx:
                        self._finish = "length"
                        break
                    if not produced:
                        tokens = [engine.sample(chain)]
                    else:
                        # A verification emits at most draft + 1 tokens: never past the budget or context.
                        room = min(max_tokens - produced, engine.n_ctx - len(self.history)) - 1
                        draft = drafting.propose(self.history, room) if drafting else []
                        step = time.perf_counter()
                        if draft:
                            assert drafting is not None
                            tokens = engine.verify_draft(
                                self.history[-1], draft, sampling, drafting.rng, self._stats
                            )
                            if len(engine._memory.tokens) != len(self.history) + len(tokens) - 1:
                                # A failed rollback cleared memory: rebuild it from the ids.
                                engine.ensure_evaluated(
                                    self.history + tokens[:-1], threading.Event(), self._stats
                                )
                            drafting.record(len(draft), tokens, time.perf_counter() - step, engine)
                        else:
                            engine.decode_one(self.history[-1], self._stats)
                            tokens = [engine.sample(chain)]
                            engine.note_plain_step(time.perf_counter() - step)
                            if drafting:
                                drafting.record(0, tokens, 0.0, engine)
                    produced += len(tokens)
                    self._stats.completion_tokens += len(tokens)
                    self._push(tokens)
                    self._sampled_last = True
                    stop = engine.is_eog(tokens[-1])
                    for piece in self._pieces[
                        len(self._pieces) - len(tokens) : len(self._pieces) - int(stop)
                    ]:
                        text = decoder.decode(piece)
                        if text:
                            yield text
                    if stop:
                        self._finish = "stop"
                        break
                tail = decoder.decode(b"", final=True)
                if tail:
                    yield tail
            finally:
                chain.close()
                self._stats.decode_seconds += time.perf_counter() - started

    def _drafting(self, sampling: SamplingParams) -> _Drafting | None:
        """This turn's drafting state, or None when speculation is off or cannot be exact here."""
        engine = self._engine
        if engine.speculation == "off" or not speculative.supported(sampling):
            return None
        if self._drafter is None:
            self._drafter = NgramDrafter()
        return _Drafting(
            self._drafter,
            AdaptiveDraftLength(engine.draft_max, engine.draft_max, engine.draft_sizes),
            np.random.default_rng(sampling.seed),
            auto=engine.speculation == "auto",
            segment_end=engine.think_end,
        )

    def checkpoint(self, cancel: threading.Event | None = None) -> Checkpoint:
        """Remember this point (right after appending a user turn) so the next turn can be regenerated.

        Evaluates the pending prompt except its last token (which ``generate`` evaluates to get
        fresh logits), then keeps one state snapshot (a few ms, tens of MB at long contexts);
        ``rewind`` restores it instead of re-evaluating the prompt.  When the model's memory
        already holds the whole history, no snapshot can serve (the logits would be missing)
        and ``rewind`` falls back to re-evaluating.
        """
        self._check_open()
        engine = self._engine
        with engine._entered():
            target = self.history[:-1]
            held = engine._memory.tokens
            if not target or held == self.history:
                return Checkpoint(len(self.history), [], None)
            completed, reused = engine.ensure_evaluated(target, cancel or threading.Event(), self._stats)
            self.reused_tokens += reused
            if not completed:
                return Checkpoint(len(self.history), [], None)
            return Checkpoint(len(self.history), engine.evaluated_tokens, engine._snapshot())

    def rewind(self, checkpoint: Checkpoint) -> None:
        """Drop everything after ``checkpoint`` (e.g. a completion to regenerate with another seed)."""
        self._check_open()
        engine = self._engine
        with engine._entered():
            del self.history[checkpoint.length :]
            del self._pieces[checkpoint.length :]
            self._stats.prompt_tokens = len(self.history)
            self._sampled_last = False
            engine._restore(checkpoint.snapshot, checkpoint.evaluated)

    def end_turn(self) -> None:
        """Make the history end in ``<|im_end|>`` without touching anything already evaluated.

        An ``<|endoftext|>`` just sampled (never evaluated) is swapped for ``<|im_end|>``; after
        a length or cancel stop, ``<|im_end|>`` is appended after the last sampled token.
        """
        self._check_open()
        engine = self._engine
        with engine._entered():
            im_end = engine.im_end
            if im_end is None:
                raise EngineError("the model's vocabulary has no <|im_end|> token")
            if self.history and self.history[-1] == im_end:
                return
            if self._sampled_last and self.history and engine.is_eog(self.history[-1]):
                self.history.pop()
                self._pieces.pop()
            self._push([im_end])
            self._sampled_last = False

    def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise EngineError("this session is closed")


def _read_through(path: Path, progress: LoadProgress) -> None:
    """Read ``path`` once from start to end (into the OS page cache), reporting the fraction read."""
    try:
        size = path.stat().st_size
        buffer = bytearray(_READ_BLOCK)
        done = 0
        with path.open("rb", buffering=0) as stream:
            while n := stream.readinto(buffer):
                done += n
                progress(done / size if size else 1.0)
    except OSError as exc:
        raise EngineError(f"could not read {path.name}: {exc.strerror or exc}") from exc
