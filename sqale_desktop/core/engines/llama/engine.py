"""``LlamaEngine``: the ``base.Engine`` of a GGUF loaded in-process, and nothing else.

The work is in the package's other modules: ``loading`` (one frozen record of what loading
decided), ``memory`` (the context's memory, token-exact), ``speculation`` (built only when
asked for) and ``session``.  This class ties them to one owner thread.

Threads: a ``llama_cpp.Llama`` context is not thread-safe.  This engine does not own a thread:
the caller (the UI's long-lived model worker, or the CLI's main thread) must use an engine and
its sessions from one thread at a time.  Misuse is caught, not tolerated: entering the engine
while another thread is inside it raises ``RuntimeError``.  Only ``cancel`` (a
``threading.Event``) is meant to be touched from other threads.  An owner-thread executor was
rejected because the episode loop is itself a generator that must run on the same thread as
the tools' SQLite connection; wrapping the engine in another thread would add a hand-off per
token for nothing.

Threads and waiting: ``thread_policy`` gives OpenMP threads a short bounded spin at barriers
(set on import of this module, before llama.cpp loads), and with "Automatic" threads a
``thread_governor`` picks each single-token step's thread count from the step times.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqale_desktop.core import paths
from sqale_desktop.core.engine_options import GpuLayers, Speculation
from sqale_desktop.core.engines.base import EngineError, EngineInfo, EngineStats, SamplingParams, WarmUp
from sqale_desktop.core.engines.llama import prefix_store, thread_policy
from sqale_desktop.core.engines.llama.cpu_info import physical_cores
from sqale_desktop.core.engines.llama.llama_sampler import SamplerChain
from sqale_desktop.core.engines.llama.loading import (
    LoadedModel,
    LoadProgress,
    LoadRequest,
    Rollback,
    Vocabulary,
    describe_placement,
    load_model,
)
from sqale_desktop.core.engines.llama.memory import Counters, Memory
from sqale_desktop.core.engines.llama.session import LlamaSession
from sqale_desktop.core.engines.llama.speculation import DRAFT_SIZES, Speculator
from sqale_desktop.core.engines.llama.thread_governor import ThreadGovernor
from sqale_desktop.core.errors import Cancelled

# Before llama_cpp (and libgomp) can load: nothing in this package imports it at the top.
POLICY_NOTE = thread_policy.apply()

THREADS_KEPT = 8
"""Finished sessions whose token ids are kept for follow-ups (a 12k-token thread is ~100 kB)."""

# What a follow-up's question may start with, for telling which ids of its turn's fixed start
# stay the same after it (``LlamaEngine._fixed_ids``): letters, digits, spaces, punctuation,
# other scripts.
_CONTINUATIONS = ("a", "A", "1", " ", "  x", "\n", ".", "?", "'s", "(", "\u00e9", "\u4e2d", "\U0001f600")

_log = logging.getLogger(__name__)


def _thread_key(fields: dict[str, object], prompt: str) -> str:
    """The thread store's key: the state's fields and the thread's exact text (its ids are in the
    file: a relaunched engine knows only the text)."""
    digest = hashlib.sha256(prompt.encode("utf-8", errors="surrogatepass")).hexdigest()
    return prefix_store.state_key({**fields, "thread_sha256": digest}, [])


class LlamaEngine:
    """A GGUF model loaded in-process through llama-cpp-python.  Implements ``base.Engine``."""

    name = "llama"

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 16384,
        n_gpu_layers: GpuLayers = "auto",
        gpu_device: str = "",
        n_threads: int | None = None,
        n_ubatch: int = 128,
        n_batch: int = 512,
        verbose: bool = False,
        gpu_memory_limit: int | None = None,
        speculation: Speculation = "off",
        draft_sizes: tuple[int, ...] = DRAFT_SIZES,
        rollback: Rollback = "auto",
        adapt_threads: bool | None = None,
        model_sha256: str = "",
    ) -> None:
        draft_sizes = tuple(sorted({max(1, k) for k in draft_sizes})) or DRAFT_SIZES
        self.request = LoadRequest(
            path=Path(model_path),
            n_ctx=n_ctx,
            n_batch=max(n_batch, n_ubatch),
            n_ubatch=n_ubatch,
            n_threads=n_threads or physical_cores(),
            gpu_layers=n_gpu_layers,
            gpu_device=gpu_device,
            gpu_memory_limit=gpu_memory_limit,
            verbose=verbose,
            speculate=speculation != "off",
            rollback=rollback,
            draft_max=draft_sizes[-1],
        )
        self.draft_sizes = draft_sizes
        # The model registry's hash of the file (the runtime hands it over): the saved states'
        # key without reading a GB (``PrefixStore.model_digest`` says when it is trusted).
        self.model_sha256 = model_sha256
        # "Automatic" threads also adapt while decoding (thread_governor); a number the user set stays fixed.
        self.adapt_threads = n_threads is None if adapt_threads is None else adapt_threads
        # The mode of the next turn; an engine loaded with "off" has no speculator to switch on.
        self.speculation: Speculation = speculation
        # What the context's memory and speculation counted (aborted prefill chunks, rollbacks).
        self.counters = Counters()
        # The loaded model's facts, one frozen record (layers and device, bytes, rollback method,
        # vocabulary and special ids); None until loaded.  Callers read them here.
        self.model: LoadedModel | None = None
        self._memory: Memory | None = None
        self._speculator: Speculator | None = None
        self._guard = threading.Lock()
        self._owner: int | None = None
        self._depth = 0
        # What the last warm_up said (restored, evaluated, a saved state that could not be used).
        self._warm_notes: list[str] = []
        # The ids of recently closed sessions by their prompt text, for follow-ups (insertion order
        # is recency: the least recently used first).
        self._threads: dict[str, list[int]] = {}

    # -- what was asked, what loading decided -------------------------------------------------

    @property
    def model_path(self) -> Path:
        return self.request.path

    @property
    def n_ctx(self) -> int:
        return self.request.n_ctx

    @property
    def n_batch(self) -> int:
        return self.request.n_batch

    @property
    def n_threads(self) -> int:
        return self.request.n_threads

    @property
    def loaded(self) -> bool:
        return self.model is not None

    @property
    def threads_kept(self) -> int:
        """How many closed sessions' token ids are kept for their follow-ups (at most
        ``THREADS_KEPT``; the least recently used goes first)."""
        return len(self._threads)

    @property
    def notes(self) -> list[str]:
        """What the status line's details and the log say about this engine."""
        policy = [POLICY_NOTE] if POLICY_NOTE else []
        return policy + (list(self.model.notes) if self.model is not None else []) + self._warm_notes

    # -- what sessions and benchmarks use (on the owner thread) ------------------------------

    @property
    def vocabulary(self) -> Vocabulary:
        if self.model is None:
            raise EngineError("the model is not loaded")
        return self.model.vocabulary

    @property
    def memory(self) -> Memory:
        """The loaded context's memory (``memory.Memory``): evaluate, snapshot, checkpoint."""
        if self._memory is None:
            raise EngineError("the model is not loaded")
        return self._memory

    @property
    def speculator(self) -> Speculator | None:
        """Drafting and verification, present only on an engine built with speculation on."""
        return self._speculator

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
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

    def tokenize(self, text: str) -> list[int]:
        """Text tokenized on its own: special tokens parsed, no BOS."""
        return self.vocabulary.tokenize(text)

    def piece(self, token: int) -> bytes:
        return self.vocabulary.piece(token)

    def is_eog(self, token: int) -> bool:
        return self.vocabulary.is_eog(token)

    @property
    def evaluated_tokens(self) -> list[int]:
        """Ids currently in the model's memory (a copy)."""
        return self._memory.tokens if self._memory is not None else []

    def ensure_evaluated(
        self, history: list[int], cancel: threading.Event, stats: EngineStats
    ) -> tuple[bool, int]:
        """See ``Memory.ensure_evaluated``: (completed, tokens reused from the system-prompt cache)."""
        return self.memory.ensure_evaluated(history, cancel, stats)

    def sampler(self, params: SamplingParams) -> SamplerChain:
        return SamplerChain(params, self.vocabulary.n_vocab)

    def sample(self, chain: SamplerChain) -> int:
        return self.memory.sample(chain)

    # -- Engine protocol -------------------------------------------------------------------

    def load(self, progress: LoadProgress | None = None) -> EngineInfo:
        """Load the model now (otherwise the first session does); retries with fewer GPU layers.

        ``progress`` gets the fraction done, reading the file first (see ``loading.load_model``).
        """
        with self.entered():
            self._load(progress)
        return self.info()

    def describe(self) -> str:
        """The status line: where the model runs, and whether that is less than was asked for."""
        model = self.model
        if model is None:
            return "local (not loaded yet)"
        return describe_placement(model, self.request.gpu_layers)

    def info(self) -> EngineInfo:
        return EngineInfo(
            kind=self.name,
            description=self.describe(),
            gpu_layers=self.model.gpu_layers if self.model is not None else 0,
            resident_bytes=self.model.resident_bytes if self.model is not None else 0,
            notes=self.notes,
        )

    def chat_template(self) -> str | None:
        with self.entered():
            template = self._loaded().llama.metadata.get("tokenizer.chat_template")
        return str(template) if template else None

    def new_session(self, prompt: str) -> LlamaSession:
        """A session whose history starts with ``prompt`` (BOS first only if the model wants one)."""
        with self.entered():
            vocabulary = self._loaded().vocabulary
            start = [vocabulary.bos] if vocabulary.add_bos else []
            return LlamaSession(self, start + vocabulary.tokenize(prompt), on_close=self._remember)

    def continue_session(self, prompt: str) -> LlamaSession:
        """A follow-up's session (``base.Continues``): the exact ids of the finished session whose
        text is ``prompt`` when this engine still knows them, else ``prompt`` tokenized.

        The ids matter: re-tokenizing sampled text does not always give the sampled ids back, and
        one changed id makes the hybrid model evaluate the whole thread again.  With the ids, a
        memory that still holds the thread (nothing ran since) evaluates only what is appended.
        """
        with self.entered():
            return LlamaSession(self, self._thread_ids(prompt), on_close=self._remember)

    def prefetch_continuation(self, prompt: str, text: str, cancel: threading.Event) -> int:
        """Evaluate now, ahead of a follow-up, the thread whose text is ``prompt`` followed by the
        ids of ``text`` that no continuation of it can change; the tokens evaluated.

        ``text`` is the fixed start of the follow-up's turn (``followup.continued_prefix``); the
        follow-up's session is built exactly as without this call, and memory then holds a prefix
        of it, so its turn evaluates only the rest (a pure append).  Only ids that tokenizing
        ``text`` with any continuation gives back are evaluated, and memory marks the thread's
        state first (``Memory.mark_point``): a history that continues the thread otherwise (another
        question template, a question starting with a space) restores it instead of evaluating
        the thread again.  Cancellable between prefill chunks and within one (the abort callback).
        """
        with self.entered():
            ids = self._thread_ids(prompt)
            fixed = self._fixed_ids(text)
            if len(ids) + len(fixed) >= self.n_ctx:
                return 0  # no room for a continued follow-up (it is carried)
            memory = self.memory
            stats = EngineStats()
            target = ids + fixed
            held = memory.tokens
            if len(held) < len(ids) - 2 or len(held) > len(target) or target[: len(held)] != held:
                # memory does not hold the thread (its end, the last sampled ids, is evaluated by the
                # next turn; another episode ran since, or a relaunch without its saved state): it
                # is evaluated here, as the follow-up would
                completed, _ = memory.ensure_evaluated(ids, cancel, stats)
                if not completed:
                    return stats.evaluated_tokens
                held = ids
            if len(held) <= len(ids):  # (else an earlier prefetch of this thread marked it)
                memory.mark_point()
            memory.ensure_evaluated(target, cancel, stats, keep_point=True)
            return stats.evaluated_tokens

    def _fixed_ids(self, text: str) -> list[int]:
        """The leading ids of ``text`` tokenized that stay the same whatever text follows it (the
        pre-tokenizer may merge its last characters with what comes next, e.g. a space and a word)."""
        vocabulary = self.vocabulary
        ids = vocabulary.tokenize(text)
        for probe in _CONTINUATIONS:
            other = vocabulary.tokenize(text + probe)
            same = 0
            while same < len(ids) and same < len(other) and ids[same] == other[same]:
                same += 1
            del ids[same:]
        return ids

    def _thread_ids(self, prompt: str) -> list[int]:
        """The ids of the thread whose text is ``prompt`` (see :meth:`continue_session`): kept,
        restored with its saved state, or tokenized; kept as the most recently used."""
        known = self._threads.pop(prompt, None)
        if known is None:
            known, reason = self._restore_thread(prompt)
        if known is None:
            _log.info("follow-up: %s; tokenizing the thread's text, and the model evaluates it again", reason)
            vocabulary = self._loaded().vocabulary
            known = ([vocabulary.bos] if vocabulary.add_bos else []) + vocabulary.tokenize(prompt)
        self._keep(prompt, known)
        return list(known)

    def _keep(self, prompt: str, history: list[int]) -> None:
        """Keep ``history`` as the ids of the thread ``prompt`` (bounded, the least recent out)."""
        self._threads.pop(prompt, None)
        self._threads[prompt] = list(history)
        while len(self._threads) > THREADS_KEPT:
            self._threads.pop(next(iter(self._threads)))

    def _remember(self, prompt: str, history: list[int]) -> None:
        """Keep a closed session's ids by its text, for a follow-up (bounded, least recent out),
        and the state memory holds of it in the thread store, for a follow-up after a relaunch."""
        self._keep(prompt, history)
        with self.entered():
            self._save_thread(prompt, history)

    def _thread_store(self) -> tuple[prefix_store.PrefixStore, dict[str, object]] | None:
        if prefix_store.disabled() or self.model is None:
            return None
        store = prefix_store.PrefixStore(
            paths.cache_dir() / prefix_store.THREADS_FOLDER,
            max_entries=prefix_store.THREAD_ENTRIES,
            max_bytes=prefix_store.THREAD_BYTES,
        )
        try:
            # the model's content hash is kept by the system-turn store: hashed once per file
            return store, self._state_fields(self.model, prefix_store.PrefixStore(), threading.Event())
        except (OSError, Cancelled):
            return None

    def _save_thread(self, prompt: str, history: list[int]) -> None:
        """Save the state after what memory holds of ``history`` (a finished session), keyed by
        the model, build and context (as the system turn's) and the thread's exact text."""
        memory = self._memory
        if memory is None:
            return
        held = memory.tokens
        if not held or len(held) < len(history) - 2 or history[: len(held)] != held:
            return  # memory moved on (another session): nothing of this thread to keep
        found = self._thread_store()
        if found is None:
            return
        store, fields = found
        state = memory.snapshot()
        if state is not None:
            store.save(_thread_key(fields, prompt), held, state, {**fields, "history": history})

    def _restore_thread(self, prompt: str) -> tuple[list[int] | None, str]:
        """The ids of the thread saved under ``prompt``'s text, with memory restored to it; or
        None and why not."""
        self._loaded()
        found = self._thread_store()
        if found is None:
            return None, "the thread's token ids are not held and no saved states are used"
        store, fields = found
        loaded = store.load(_thread_key(fields, prompt), None)
        history = (loaded.fields or {}).get("history")
        if loaded.state is None or not isinstance(history, list):
            return None, loaded.problem or "no saved state of this thread (another model, build or context)"
        held = list(loaded.tokens)
        if history[: len(held)] != held:
            return None, "the saved thread state does not match its ids"
        memory = self.memory
        memory.restore(loaded.state, held)
        if memory.tokens != held:
            if loaded.path is not None:
                store.discard(loaded.path)
            return None, "llama.cpp refused the saved thread state (deleted)"
        _log.info("follow-up: the thread (%d tokens) restored from its saved state", len(held))
        return [int(t) for t in history], ""

    def system_turn(self, prompt: str) -> list[int]:
        """The ids of ``prompt``'s leading system turn, through its first ``<|im_end|>``.

        Tokenized exactly as :meth:`new_session` tokenizes a whole prompt (BOS first if the
        model wants one, the text as one string): llama.cpp splits text at special tokens before
        tokenizing, so these ids are the first ids of every episode prompt that starts with the
        same system turn.  The whole prompt's ids when it has no ``<|im_end|>``.
        """
        with self.entered():
            vocabulary = self._loaded().vocabulary
            ids = ([vocabulary.bos] if vocabulary.add_bos else []) + vocabulary.tokenize(prompt)
            im_end = vocabulary.im_end
            return ids[: ids.index(im_end) + 1] if im_end is not None and im_end in ids else ids

    def warm_up(self, prompt: str, cancel: threading.Event) -> WarmUp:
        """Have ``prompt``'s system turn evaluated before the first question (``base.WarmsUp``).

        The state after the turn comes from the app's cache folder when an earlier launch saved
        it for exactly this model file, turn and build (``prefix_store``: milliseconds); else
        it is evaluated now (what the first question would otherwise wait for) and saved.
        Either way it becomes the memory's system-turn cache, so the first episode evaluates
        only its user turn.  A saved state that cannot be used is deleted, noted in ``notes``,
        and the turn evaluated.  Cancellable between prefill chunks (and while hashing the model
        file the first time).
        """
        with self.entered():
            started = time.perf_counter()
            model = self._loaded()
            memory = self.memory
            turn = self.system_turn(prompt)
            stats = EngineStats()
            notes: list[str] = []
            if memory.holds_prefix(turn):
                memory.warm(turn, cancel, stats)
                return WarmUp(len(turn), True, note=f"system turn ({len(turn)} tokens) already in memory")
            store = None if prefix_store.disabled() else prefix_store.PrefixStore()
            fields: dict[str, object] = {}
            if store is not None:
                try:
                    fields = self._state_fields(model, store, cancel)
                except OSError as exc:
                    notes.append(f"saved model states unused: cannot hash {self.model_path.name} ({exc})")
                    store = None
                except Cancelled:  # cancelled while hashing: nothing evaluated yet
                    return WarmUp(len(turn), False, note="system-turn warm-up cancelled")
            key = prefix_store.state_key(fields, turn) if store is not None else ""
            if store is not None:
                loaded = store.load(key, turn)
                if loaded.problem:
                    notes.append(f"the saved system-turn state {loaded.problem}; evaluating the turn again")
                if loaded.state is not None:
                    if memory.install_prefix(turn, loaded.state):
                        seconds = time.perf_counter() - started
                        note = (
                            f"system turn ({len(turn)} tokens) restored from the saved state "
                            f"in {seconds * 1000:.0f} ms"
                        )
                        self._warm_notes = [*notes, note]
                        return WarmUp(len(turn), True, restored=True, seconds=seconds, note=note)
                    if loaded.path is not None:
                        store.discard(loaded.path)
                    notes.append(
                        "llama.cpp refused the saved system-turn state; deleted, evaluating the turn"
                    )
            completed = memory.warm(turn, cancel, stats)
            state = memory.prefix_state
            saved = ""
            if completed and store is not None and state is not None and memory.holds_prefix(turn):
                path = store.save(key, turn, state, fields)
                saved = f", saved ({len(state) / 2**20:.1f} MiB)" if path is not None else ", not saved"
            seconds = time.perf_counter() - started
            if completed:
                note = f"system turn ({len(turn)} tokens) evaluated in {seconds:.1f} s{saved}"
            else:
                note = f"system-turn warm-up cancelled after {stats.evaluated_tokens} of {len(turn)} tokens"
            self._warm_notes = [*notes, note]
            return WarmUp(len(turn), completed, evaluated=stats.evaluated_tokens, seconds=seconds, note=note)

    def _state_fields(
        self, model: LoadedModel, store: prefix_store.PrefixStore, cancel: threading.Event
    ) -> dict[str, object]:
        """Everything a saved sequence state depends on besides its token ids (``prefix_store``)."""
        import llama_cpp

        request = self.request
        backends: Any = getattr(model, "backends", None)
        key = getattr(backends, "key", None)
        device = model.device
        n_rs_seq = getattr(model.lib, "llama_n_rs_seq", None)
        return {
            "model_sha256": store.model_digest(request.path, cancel, known=self.model_sha256),
            "backends": key() if callable(key) else str(backends),
            "device": f"{device.name}: {device.description}" if device is not None else "cpu",
            "gpu_layers": model.gpu_layers,
            "n_ctx": request.n_ctx,
            "n_batch": request.n_batch,
            "n_ubatch": request.n_ubatch,
            "flash_attn": request.speculate,
            "n_rs_seq": int(n_rs_seq(model.ctx)) if callable(n_rs_seq) else -1,
            "draft_max": request.draft_max if request.speculate else 0,
            "rollback": model.rollback,
            "llama_cpp": str(getattr(llama_cpp, "__version__", "")),
        }

    def close(self) -> None:
        """Free the model and context (the engine can be loaded again)."""
        with self.entered():
            model, memory = self.model, self._memory
            self.model, self._memory, self._speculator = None, None, None
            self._warm_notes = []
            if memory is not None:
                memory.close()
            if model is not None:
                model.llama.close()

    # -- internals -------------------------------------------------------------------------

    def _loaded(self) -> LoadedModel:
        if self.model is None:
            self._load()
        assert self.model is not None
        return self.model

    def _load(self, progress: LoadProgress | None = None) -> None:
        if self.model is not None:
            return
        request = self.request
        model = load_model(request, progress)
        governor = ThreadGovernor(request.n_threads) if self.adapt_threads and request.n_threads > 1 else None
        memory = Memory(
            model.lib,
            model.ctx,
            n_ctx=request.n_ctx,
            n_batch=request.n_batch,
            n_threads=request.n_threads,
            n_vocab=model.vocabulary.n_vocab,
            im_end=model.vocabulary.im_end,
            governor=governor,
            counters=self.counters,
            all_logits_batch=request.draft_max + 1 if request.speculate else 0,
        )
        if request.speculate:
            self._speculator = Speculator(
                memory,
                model.vocabulary.is_eog,
                draft_sizes=self.draft_sizes,
                rollback=model.rollback,
                think_end=model.vocabulary.think_end,
                counters=self.counters,
            )
        self.model, self._memory = model, memory
