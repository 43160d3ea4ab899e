"""Runs of streamed text deltas, merged into one delta each before the window shows them.

The agent runner drains what the worker queued every 40 ms; at full speed that is thousands of
four-character deltas, all on the UI thread.  Merging them pairwise (``a.text + b.text``, a new
delta and a new envelope per step) copied the run's text once per delta, so a drain cost grew with
the square of its length (10-20 ms of a worst stall in ``benchmarks/ui.py``; issue 32).  Here a run
is found first and joined once: one pass over the items, one string join and one new delta per run.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, TypeVar

from sqale_desktop.core.agent.events import TextDelta


class Envelope(Protocol):
    """What the runner queues (its ``EventItem``, ``EpisodeFailed``, ``EpisodeDone``): each names
    its episode, and the one that carries a streamed event is a dataclass with an ``event`` field.
    A protocol, not the runner's own types, so this module does not import the runner that uses it."""

    @property
    def episode_id(self) -> int: ...


Item = TypeVar("Item", bound=Envelope)


def _delta(item: Envelope) -> TextDelta | None:
    event = getattr(item, "event", None)  # only an EventItem carries an event
    return event if isinstance(event, TextDelta) else None


def merge_deltas(items: list[Item]) -> list[Item]:
    """Merge runs of text deltas of the same episode, turn and phase into one delta each.

    Everything else, and the order of it all, is kept; a run of one delta is the item itself.
    """
    merged: list[Item] = []
    start, count = 0, len(items)
    while start < count:
        first = items[start]
        head = _delta(first)
        end = start + 1
        if head is not None:
            while end < count:
                delta = _delta(items[end])
                if (
                    delta is None
                    or items[end].episode_id != first.episode_id
                    or delta.turn != head.turn
                    or delta.phase != head.phase
                ):
                    break
                end += 1
        if end - start == 1 or head is None:
            merged.append(first)
        else:
            run = [_delta(item) for item in items[start:end]]
            text = "".join(delta.text for delta in run if delta is not None)
            tokens = sum(delta.tokens for delta in run if delta is not None)
            whole = TextDelta(turn=head.turn, text=text, phase=head.phase, tokens=tokens)
            # Only an EventItem carries a delta; the run's first envelope, around the whole run.
            envelope: Any = first  # the dataclass EventItem: replace() keeps its other fields
            merged.append(dataclasses.replace(envelope, event=whole))
        start = end
    return merged
