"""The contract between the episode loop and the engines that generate completions.

An episode's prompt is only ever appended to, so an engine holds it as a *session* that grows:
the llama.cpp engine keeps it as token ids (the exact sampled ids plus each appended turn
tokenized on its own), so nothing is ever re-tokenized and the hybrid model's cache is never
invalidated; the HTTP engine keeps the text and sends it whole; the replay engine keeps the text
and plays back scripted completions.  The loop never rebuilds a prompt from a message list.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.server_usage import ServerUsage

FinishReason = Literal["stop", "length", "cancelled"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so that it encodes as UTF-8.

    JSON allows ``"\\ud800"`` and a server may send it; a command line may carry undecodable
    bytes as surrogates.  Such text passes through Python but fails at the first strict encode (the
    history's SQLite, ``--json`` output, the window), so it is cleaned once where it enters the
    core: in the engines, for what they generate and what is appended to a prompt.
    """
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text


END_OF_TURN = "<|im_end|>"
STOP_STRINGS: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>")


@dataclass(frozen=True)
class SamplingParams:
    """Sampling as in the model card; every field is passed on every call (library defaults are wrong)."""

    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 20
    min_p: float = 0.0
    repeat_penalty: float = 1.0
    seed: int | None = None


@dataclass
class EngineStats:
    """Token accounting of one session.

    ``prompt_tokens`` is the length of the whole episode prompt so far (completions included);
    ``evaluated_tokens`` counts tokens the model actually ran through (prefill and decode), so a
    perfect cache gives ``evaluated_tokens`` close to ``prompt_tokens``.  With speculative
    decoding, ``drafted_tokens`` were proposed and checked, ``accepted_tokens`` of them kept;
    rejected drafts are rolled back out of memory and not counted as evaluated.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    evaluated_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    server_usage: ServerUsage | None = None
    """What a server reported it used (summed over the session's requests) and its cost; None for
    an engine that bills nothing (``core.server_usage``)."""


class EngineSession(Protocol):
    """One episode's growing prompt inside an engine."""

    @property
    def prompt_text(self) -> str:
        """The whole prompt as text: exactly what the model has seen, completions included."""
        ...

    @property
    def stats(self) -> EngineStats: ...

    @property
    def last_finish_reason(self) -> FinishReason:
        """Why the last ``generate`` ended."""
        ...

    def append(self, text: str) -> None:
        """Append text (a user turn, an assistant-turn opener), tokenized on its own with specials parsed."""
        ...

    def generate(self, max_tokens: int, sampling: SamplingParams, cancel: threading.Event) -> Iterator[str]:
        """Sample an assistant completion, yielding text deltas as they are decoded.

        Stops on ``<|im_end|>`` / ``<|endoftext|>`` (not part of the yielded text), after
        ``max_tokens`` or when ``cancel`` is set (checked between tokens and prefill chunks).
        """
        ...

    def end_turn(self) -> None:
        """Close the assistant turn with ``<|im_end|>`` in the history, however generation ended."""
        ...

    def close(self) -> None: ...


class SessionFacts:
    """What every session keeps the same way for :class:`EngineSession`: its token accounting
    (``stats``) and why its last ``generate`` ended (``last_finish_reason``: "stop" before any,
    set by the subclass as ``_finish``)."""

    def __init__(self, stats: EngineStats) -> None:
        self._stats = stats
        self._finish: FinishReason = "stop"

    @property
    def stats(self) -> EngineStats:
        return self._stats

    @property
    def last_finish_reason(self) -> FinishReason:
        return self._finish


class Engine(Protocol):
    """Something that can open sessions.  Long-lived: one loaded model serves many episodes."""

    name: str

    def describe(self) -> str:
        """For the status bar: "local CPU", "local GPU (24 layers)", "server http://…", "replay"."""
        ...

    def chat_template(self) -> str | None:
        """The model's own chat template when known (GGUF metadata), to match its assistant opener."""
        ...

    def new_session(self, prompt: str) -> EngineSession:
        """Start an episode whose prompt begins with ``prompt``."""
        ...


@dataclass(frozen=True)
class WarmUp:
    """What an engine's ``warm_up`` did with the system turn its episodes start with."""

    tokens: int
    """The system turn's length in tokens (BOS included where the model wants one)."""
    completed: bool
    """False when cancelled: the first episode evaluates what is missing."""
    restored: bool = False
    """Restored from the state saved by an earlier launch, not evaluated."""
    evaluated: int = 0
    """Tokens the model ran through now (0 when restored or already held)."""
    seconds: float = 0.0
    note: str = ""
    """One line for the log and the status details."""


class WarmsUp(Protocol):
    """An engine that can evaluate a prompt's system turn before the first question.

    Optional: the window calls ``warm_up`` after loading where an engine has it (the in-process
    llama engine); the HTTP and replay engines have nothing to warm and simply lack it.
    """

    def warm_up(self, prompt: str, cancel: threading.Event) -> WarmUp:
        """Evaluate ``prompt``'s leading system turn (through its first ``<|im_end|>``) and keep it
        for the episodes that start with it; ``cancel`` stops it between prefill chunks."""
        ...


class Continues(Protocol):
    """An engine that can continue a finished episode's prompt without evaluating it again.

    Optional (``core.agent.followup.continue_session`` falls back to ``new_session``): the
    llama engine keeps the exact token ids of its recent finished sessions by their text, so a
    follow-up's history starts with the ids the model evaluated, and its memory, still holding
    them, evaluates only what the follow-up appends; the replay engine counts the prompt as
    already evaluated, as a perfect cache would.
    """

    def continue_session(self, prompt: str) -> EngineSession:
        """A session whose history is exactly ``prompt`` (a finished session's ``prompt_text``)."""
        ...


@dataclass
class EngineInfo:
    """What the UI shows about a loaded engine."""

    kind: str
    description: str
    gpu_layers: int = 0
    resident_bytes: int = 0
    notes: list[str] = field(default_factory=list)


class EngineError(KnownError, RuntimeError):
    """A known failure of an engine (model file unreadable, server unreachable); the message is for people."""
