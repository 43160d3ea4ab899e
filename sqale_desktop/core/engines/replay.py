"""An engine that plays back scripted completions: for tests, demos and replaying a recorded episode.

Each session replays the script from its first completion, one per ``generate`` call, streamed in
small chunks with an optional delay between them (so a UI test can watch cards appear
mid-episode) and stopping as soon as ``cancel`` is set.  It behaves like a model where that
matters to the loop: it stops at ``<|im_end|>`` / ``<|endoftext|>`` inside a scripted text, honours
``max_tokens`` (finish reason ``length``), and keeps token counts.  Tokens are counted
approximately (words and punctuation marks), since there is no tokenizer; every token is
"evaluated" once, like a perfect cache.
"""

from __future__ import annotations

import bisect
import json
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sqale_desktop.core.engines.base import (
    STOP_STRINGS,
    EngineError,
    FinishReason,
    SamplingParams,
    valid_text,
)
from sqale_desktop.core.engines.text_session import TOKEN_PATTERN, TextPromptSession, count_tokens

# count_tokens is re-exported: the loop and tests estimate token counts with it.
__all__ = ["ReplayEngine", "ReplaySession", "count_tokens", "load_script"]


def load_script(path: Path) -> list[str]:
    """Completions from a JSON file: a list of strings, a recorded episode (``turns[].completion``),
    or ``{"completions": [...], "n_ctx": N}`` (a replay that says its context, see ``from_file``).

    Raises :class:`EngineError` with a message for people when the file is unusable.
    """
    return _read_script(path)[0]


def _read_script(path: Path) -> tuple[list[str], int | None]:
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise EngineError(f"cannot read the replay file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise EngineError(f"the replay file {path} is not valid JSON: {exc}") from None
    n_ctx = None
    if isinstance(data, dict) and isinstance(data.get("completions"), list):
        context = data.get("n_ctx")
        if context is not None and (
            not isinstance(context, int) or isinstance(context, bool) or context <= 0
        ):
            raise EngineError(f"the replay file {path} has an n_ctx that is not a positive number")
        n_ctx, data = context, data["completions"]
    elif isinstance(data, dict) and isinstance(data.get("turns"), list):
        data = [turn.get("completion") if isinstance(turn, dict) else None for turn in data["turns"]]
    if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
        raise EngineError(
            f"the replay file {path} must hold a JSON list of strings (one completion per assistant "
            "turn) or a recorded episode with turns[].completion"
        )
    return list(data), n_ctx


class ReplayEngine:
    """Scripted completions behind the :class:`~sqale_desktop.core.engines.base.Engine` protocol."""

    name = "replay"

    def __init__(
        self,
        completions: Sequence[str],
        *,
        chunk_chars: int = 8,
        delay: float = 0.0,
        template: str | None = None,
        n_ctx: int | None = None,
    ) -> None:
        """``n_ctx``: the context this replay pretends to have (None: it does not say); a
        follow-up whose thread would not fit it is carried (``core.agent.followup``)."""
        if chunk_chars < 1:
            raise ValueError("chunk_chars must be at least 1")
        if n_ctx is not None:
            self.n_ctx = n_ctx
        self._completions = list(completions)
        self._chunk_chars = chunk_chars
        self._delay = delay
        self._template = template

    @classmethod
    def from_file(cls, path: Path, *, chunk_chars: int = 8, delay: float = 0.0) -> ReplayEngine:
        completions, n_ctx = _read_script(path)
        return cls(completions, chunk_chars=chunk_chars, delay=delay, n_ctx=n_ctx)

    def describe(self) -> str:
        return f"replay ({len(self._completions)} scripted turns)"

    def chat_template(self) -> str | None:
        return self._template

    def new_session(self, prompt: str) -> ReplaySession:
        return ReplaySession(prompt, self._completions, self._chunk_chars, self._delay)

    def continue_session(self, prompt: str) -> ReplaySession:
        """A follow-up's session (``base.Continues``): the thread counts as held, not evaluated
        (a perfect cache); the script plays from its first completion, as in every session."""
        return ReplaySession(prompt, self._completions, self._chunk_chars, self._delay, cached=True)


class ReplaySession(TextPromptSession):
    """One episode of a :class:`ReplayEngine`."""

    def __init__(
        self, prompt: str, completions: Sequence[str], chunk_chars: int, delay: float, *, cached: bool = False
    ) -> None:
        super().__init__(prompt, evaluates_appends=True, cached=cached)
        self._script = list(completions)
        self._next = 0
        self._chunk_chars = chunk_chars
        self._delay = delay

    def generate(self, max_tokens: int, sampling: SamplingParams, cancel: threading.Event) -> Iterator[str]:
        # a script (a JSON file) may hold lone surrogates; cleaned as every engine cleans its output
        text = valid_text(self._script[self._next]) if self._next < len(self._script) else ""
        self._next += 1
        text, finish = _cut(text, max_tokens)
        self._finish = finish
        # A token counts once it has begun, so chunk boundaries inside a word do not inflate counts.
        token_starts = [match.start() for match in TOKEN_PATTERN.finditer(text)]
        counted = 0
        started = time.perf_counter()
        try:
            for start in range(0, len(text), self._chunk_chars):
                if cancel.is_set() or (self._delay > 0 and cancel.wait(self._delay)):
                    self._finish = "cancelled"
                    return
                chunk = text[start : start + self._chunk_chars]
                self._parts.append(chunk)
                produced = bisect.bisect_left(token_starts, start + len(chunk)) - counted
                counted += produced
                self._stats.completion_tokens += produced
                self._stats.prompt_tokens += produced
                self._stats.evaluated_tokens += produced
                yield chunk
        finally:
            self._stats.decode_seconds += time.perf_counter() - started

    def close(self) -> None:
        self._script = []


def _cut(text: str, max_tokens: int) -> tuple[str, FinishReason]:
    """The part of a scripted completion a model would have produced, and why it ended."""
    for stop in STOP_STRINGS:
        index = text.find(stop)
        if index >= 0:
            text = text[:index]
    if max_tokens <= 0:
        return "", "length"
    for number, match in enumerate(TOKEN_PATTERN.finditer(text), start=1):
        if number > max_tokens:
            return text[: match.start()], "length"
    return text, "stop"
