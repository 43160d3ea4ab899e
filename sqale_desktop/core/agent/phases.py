"""Labelling streamed text as thinking or answer, when ``<think>`` tags arrive split across deltas.

A tag may be cut anywhere (``"</thi"`` then ``"nk>"``), so the tail of a delta that could still
become a tag is held back until the next delta decides it.  Tags belong to the phase they open or
close (``<think>`` and ``</think>`` are both shown as thinking).
"""

from __future__ import annotations

from sqale_desktop.core.agent.events import Phase

_OPEN = "<think>"
_CLOSE = "</think>"


class PhaseSplitter:
    """Feed text deltas in order; get back ``(text, phase)`` pieces whose concatenation is the input."""

    def __init__(self, starts_in_think: bool) -> None:
        self._thinking = starts_in_think
        self._held = ""

    @property
    def thinking(self) -> bool:
        return self._thinking

    def feed(self, delta: str) -> list[tuple[str, Phase]]:
        text = self._held + delta
        self._held = ""
        pieces: list[tuple[str, Phase]] = []
        while text:
            tag = _CLOSE if self._thinking else _OPEN
            index = text.find(tag)
            if index >= 0:
                end = index + len(tag)
                if self._thinking:
                    pieces.append((text[:end], "think"))
                else:
                    if index:
                        pieces.append((text[:index], "answer"))
                    pieces.append((tag, "think"))
                self._thinking = not self._thinking
                text = text[end:]
                continue
            keep = _partial_suffix(text, tag)
            emit = text[: len(text) - keep]
            if emit:
                pieces.append((emit, self._phase()))
            self._held = text[len(text) - keep :]
            break
        return pieces

    def flush(self) -> list[tuple[str, Phase]]:
        held, self._held = self._held, ""
        return [(held, self._phase())] if held else []

    def _phase(self) -> Phase:
        return "think" if self._thinking else "answer"


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that is a proper beginning of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0
