"""Streamed text deltas are merged in one pass (issue 32: merging pairwise copied a run's text once
per delta, so a drain of a thousand deltas cost tens of milliseconds on the UI thread)."""

from __future__ import annotations

from typing import Any

import pytest

from sqale_desktop.core.agent.events import TextDelta, ToolCalled
from sqale_desktop.ui import agent_runner
from sqale_desktop.ui.agent_runner import EpisodeDone, EventItem
from sqale_desktop.ui.stream_merge import merge_deltas


class CountedText(str):
    """Text that counts the characters a ``+`` copies (a concatenation's result counts on)."""

    copied = 0

    def __add__(self, other: str) -> CountedText:
        CountedText.copied += len(self) + len(other)
        return CountedText(str.__add__(self, other))


def test_runs_merge_whole_and_everything_else_keeps_its_place() -> None:
    tool = EventItem(1, ToolCalled(1, 0, "list_tables", {}))
    done = EpisodeDone(1)
    items: list[Any] = [
        EventItem(1, TextDelta(1, "a", "think", tokens=1)),
        EventItem(1, TextDelta(1, "b", "think", tokens=2)),
        EventItem(1, TextDelta(1, "c", "answer", tokens=1)),
        tool,
        EventItem(1, TextDelta(2, "d", "think")),
        EventItem(1, TextDelta(2, "e", "think")),
        EventItem(2, TextDelta(2, "f", "think")),  # another episode's text is never merged in
        done,
    ]
    merged = merge_deltas(items)
    assert merged == [
        EventItem(1, TextDelta(1, "ab", "think", tokens=3)),
        EventItem(1, TextDelta(1, "c", "answer", tokens=1)),
        tool,
        EventItem(1, TextDelta(2, "de", "think")),
        EventItem(2, TextDelta(2, "f", "think")),
        done,
    ]
    assert merged[1] is items[2] and merged[2] is tool  # a lone item is handed on as it is
    assert merge_deltas([]) == []


@pytest.mark.parametrize("deltas", [10, 4_000])
def test_merging_a_run_costs_one_delta_and_no_pairwise_copy(
    deltas: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = []
    original = TextDelta.__init__

    def counting_init(self: TextDelta, *args: Any, **kwargs: Any) -> None:
        built.append(1)
        original(self, *args, **kwargs)

    items: list[Any] = [EventItem(1, TextDelta(1, CountedText("abcd"), "think", 1)) for _ in range(deltas)]
    items.append(EventItem(1, ToolCalled(1, 0, "run_query", {})))
    items.extend(EventItem(1, TextDelta(2, CountedText("wxyz"), "think")) for _ in range(deltas))
    CountedText.copied = 0
    monkeypatch.setattr(TextDelta, "__init__", counting_init)
    merged = merge_deltas(items)
    monkeypatch.undo()
    texts = [item.event for item in merged if isinstance(item, EventItem)]
    assert [event.text for event in texts if isinstance(event, TextDelta)] == [
        "abcd" * deltas,
        "wxyz" * deltas,
    ]
    assert isinstance(texts[0], TextDelta) and texts[0].tokens == deltas
    # One new delta per run, whatever its length, and no text copied pair by pair (pairwise
    # merging copied 4 * deltas**2 characters: 64 million for 4,000 deltas).
    assert len(built) == 2
    assert CountedText.copied == 0
    assert agent_runner.merge_deltas is merge_deltas  # type: ignore[attr-defined]  # the runner's drain
