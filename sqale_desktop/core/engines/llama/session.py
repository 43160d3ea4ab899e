"""One episode as token ids: the ``base.EngineSession`` of the llama engine.

``history`` is authoritative: the sampled ids (end-of-turn token included) and each appended
text tokenized on its own, never the text re-tokenized (that does not always give the sampled
ids back).  The session sees its engine through :class:`SessionEngine`, so this module imports
nothing of ``engine``.
"""

from __future__ import annotations

import codecs
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from sqale_desktop.core.engine_options import Speculation
from sqale_desktop.core.engines.base import EngineError, EngineStats, SamplingParams, SessionFacts
from sqale_desktop.core.engines.llama.llama_sampler import SamplerChain
from sqale_desktop.core.engines.llama.loading import Vocabulary
from sqale_desktop.core.engines.llama.memory import Checkpoint, Memory
from sqale_desktop.core.engines.llama.ngram_draft import NgramDrafter
from sqale_desktop.core.engines.llama.speculation import Speculator


class SessionEngine(Protocol):
    """What a session needs of its engine (``engine.LlamaEngine``), all on the owner thread."""

    @property
    def n_ctx(self) -> int: ...

    @property
    def speculation(self) -> Speculation: ...

    @property
    def memory(self) -> Memory: ...

    @property
    def vocabulary(self) -> Vocabulary: ...

    @property
    def speculator(self) -> Speculator | None: ...

    def entered(self) -> contextlib.AbstractContextManager[None]: ...

    def sampler(self, params: SamplingParams) -> SamplerChain: ...


class LlamaSession(SessionFacts):
    """One episode as token ids inside a ``LlamaEngine``.  Implements ``base.EngineSession``.

    The last sampled token (the end-of-turn token, or the last one before a length/cancel stop)
    is not evaluated when sampled; the next ``generate`` evaluates it first, so a turn boundary
    costs nothing.
    """

    def __init__(
        self,
        engine: SessionEngine,
        history: list[int],
        *,
        on_close: Callable[[str, list[int]], None] | None = None,
    ) -> None:
        """``on_close(prompt_text, history)`` hears the finished session (the engine keeps its ids
        for a follow-up)."""
        super().__init__(EngineStats(prompt_tokens=len(history)))
        self._engine = engine
        self._on_close = on_close
        self.history: list[int] = history
        vocabulary = engine.vocabulary
        self._pieces: list[bytes] = [vocabulary.piece(t) for t in history]
        # Tokens restored from the engine's system-prompt cache rather than evaluated.
        self.reused_tokens = 0
        self._sampled_last = False
        self._closed = False
        self._drafter: NgramDrafter | None = None

    @property
    def prompt_text(self) -> str:
        return b"".join(self._pieces).decode("utf-8", errors="replace")

    def _push(self, tokens: list[int]) -> None:
        self.history.extend(tokens)
        vocabulary = self._engine.vocabulary
        self._pieces.extend(vocabulary.piece(t) for t in tokens)
        self._stats.prompt_tokens = len(self.history)

    def append(self, text: str) -> None:
        self._check_open()
        with self._engine.entered():
            self._push(self._engine.vocabulary.tokenize(text))
            self._sampled_last = False

    def generate(self, max_tokens: int, sampling: SamplingParams, cancel: threading.Event) -> Iterator[str]:
        """Sample up to ``max_tokens`` tokens, yielding decoded text as soon as it is whole UTF-8."""
        self._check_open()
        engine = self._engine
        with engine.entered():
            self._finish = "cancelled"
            self._sampled_last = False
            memory, vocabulary, speculator = engine.memory, engine.vocabulary, engine.speculator
            completed, reused = memory.ensure_evaluated(self.history, cancel, self._stats)
            self.reused_tokens += reused
            if not completed:
                return
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            chain = engine.sampler(sampling)
            drafting = None
            if speculator is not None:
                drafting = speculator.drafting(engine.speculation, sampling, self._episode_drafter)
            n_ctx = engine.n_ctx
            started = time.perf_counter()
            try:
                produced = 0
                while True:
                    if cancel.is_set():
                        self._finish = "cancelled"
                        break
                    if produced >= max_tokens or len(self.history) >= n_ctx:
                        self._finish = "length"
                        break
                    if not produced:
                        tokens = [memory.sample(chain)]
                    else:
                        # A verification emits at most draft + 1 tokens: never past the budget or context.
                        room = min(max_tokens - produced, n_ctx - len(self.history)) - 1
                        draft = drafting.propose(self.history, room) if drafting else []
                        step = time.perf_counter()
                        if draft:
                            assert drafting is not None and speculator is not None
                            tokens = speculator.verify(
                                self.history[-1], draft, sampling, drafting.rng, self._stats
                            )
                            if len(memory) != len(self.history) + len(tokens) - 1:
                                # A failed rollback cleared memory: rebuild it from the ids.
                                memory.ensure_evaluated(
                                    self.history + tokens[:-1], threading.Event(), self._stats
                                )
                            seconds = time.perf_counter() - step
                            drafting.record(len(draft), tokens, seconds, speculator.plain_step_s)
                        else:
                            memory.decode_one(self.history[-1], self._stats)
                            tokens = [memory.sample(chain)]
                            if speculator is not None:
                                speculator.note_plain_step(time.perf_counter() - step)
                                if drafting:
                                    drafting.record(0, tokens, 0.0, speculator.plain_step_s)
                    produced += len(tokens)
                    self._stats.completion_tokens += len(tokens)
                    self._push(tokens)
                    self._sampled_last = True
                    stop = vocabulary.is_eog(tokens[-1])
                    end = len(self._pieces)
                    for piece in self._pieces[end - len(tokens) : end - int(stop)]:
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

    def _episode_drafter(self) -> NgramDrafter:
        """The n-gram index over this episode, made on the first turn that drafts and kept after."""
        if self._drafter is None:
            self._drafter = NgramDrafter()
        return self._drafter

    def checkpoint(self, cancel: threading.Event | None = None) -> Checkpoint:
        """Remember this point (right after appending a user turn) so the next turn can be regenerated.

        One state snapshot (``Memory.checkpoint``); ``rewind`` restores it instead of
        re-evaluating the prompt.
        """
        self._check_open()
        with self._engine.entered():
            checkpoint, reused = self._engine.memory.checkpoint(
                self.history, cancel or threading.Event(), self._stats
            )
            self.reused_tokens += reused
            return checkpoint

    def rewind(self, checkpoint: Checkpoint) -> None:
        """Drop everything after ``checkpoint`` (e.g. a completion to regenerate with another seed)."""
        self._check_open()
        with self._engine.entered():
            del self.history[checkpoint.length :]
            del self._pieces[checkpoint.length :]
            self._stats.prompt_tokens = len(self.history)
            self._sampled_last = False
            self._engine.memory.rewind(checkpoint)

    def end_turn(self) -> None:
        """Make the history end in ``<|im_end|>`` without touching anything already evaluated.

        An ``<|endoftext|>`` just sampled (never evaluated) is swapped for ``<|im_end|>``; after
        a length or cancel stop, ``<|im_end|>`` is appended after the last sampled token.
        """
        self._check_open()
        with self._engine.entered():
            vocabulary = self._engine.vocabulary
            im_end = vocabulary.im_end
            if im_end is None:
                raise EngineError("the model's vocabulary has no <|im_end|> token")
            if self.history and self.history[-1] == im_end:
                return
            if self._sampled_last and self.history and vocabulary.is_eog(self.history[-1]):
                self.history.pop()
                self._pieces.pop()
            self._push([im_end])
            self._sampled_last = False

    def close(self) -> None:
        if not self._closed and self._on_close is not None:
            self._on_close(self.prompt_text, list(self.history))
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise EngineError("this session is closed")
