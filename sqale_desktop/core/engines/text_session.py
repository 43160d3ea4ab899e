"""A session that holds its prompt as text: shared by the HTTP engine and the replay engine.

Both keep the prompt as the concatenation of what was appended (the server gets it whole with
every request; replay only records it), count tokens approximately until something better is known
(the server's ``usage``), and close an assistant turn by appending ``<|im_end|>`` as text.  The
llama.cpp engine is different on purpose: it keeps token ids (see ``llama``).
"""

from __future__ import annotations

import re

from sqale_desktop.core.engines.base import END_OF_TURN, EngineStats, SessionFacts, valid_text

TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """An approximate token count (words and punctuation), for engines without a tokenizer."""
    return sum(1 for _ in TOKEN_PATTERN.finditer(text))


class TextPromptSession(SessionFacts):
    """The text-prompt half of ``base.EngineSession``; subclasses add ``generate`` and ``close``.

    ``evaluates_appends`` says whether appended text counts as evaluated by this engine (replay
    pretends a model read it; a server's own cache makes that unknowable from here).
    """

    def __init__(self, prompt: str, *, evaluates_appends: bool, cached: bool = False) -> None:
        """``cached``: the prompt is a finished session's, still held (counted, not evaluated)."""
        prompt = valid_text(prompt)
        super().__init__(EngineStats())
        self._parts = [prompt]
        self._evaluates_appends = evaluates_appends and not cached
        self._count(prompt)
        self._evaluates_appends = evaluates_appends

    @property
    def prompt_text(self) -> str:
        return "".join(self._parts)

    def append(self, text: str) -> None:
        text = valid_text(text)
        self._parts.append(text)
        self._count(text)

    def end_turn(self) -> None:
        self.append(END_OF_TURN)

    def _count(self, text: str) -> None:
        tokens = count_tokens(text)
        self._stats.prompt_tokens += tokens
        if self._evaluates_appends:
            self._stats.evaluated_tokens += tokens
