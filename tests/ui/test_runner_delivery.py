"""The runner hands the window what the agent produced a budget at a time, in order (issue 32: a
tool card and the next turn, built in one turn of the event loop, stalled it for 40 ms).

The cost of each item is the test's own clock (the sink advances it), so what is checked is how
the runner splits the work, never how long anything took.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sqale_desktop.core.agent.events import TextDelta, ToolCalled
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.ui import agent_runner
from sqale_desktop.ui.agent_runner import AgentRunner, EventItem, Item
from tests.ui.runtimes import scripted


class Clock:
    """Stands for the ``time`` module in ``ui.agent_runner``: seconds pass when the sink says."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(agent_runner, "time", fake)
    return fake


@pytest.fixture
def runner() -> Iterator[AgentRunner]:
    made = AgentRunner(scripted(lambda: ReplayEngine([])))
    yield made
    assert made.shutdown()


def delta(turn: int, text: str) -> EventItem:
    return EventItem(1, TextDelta(turn, text, "think"))


def card(index: int) -> EventItem:
    return EventItem(1, ToolCalled(1, index, "run_sql", {"sql": f"SELECT {index}"}))


def deliver(
    qtbot: Any, runner: AgentRunner, clock: Clock, items: list[Item], card_cost: float
) -> list[list[Item]]:
    """Queue ``items`` on the worker's side and let the runner deliver them all; what each turn of
    the event loop handed on (a turn pauses the worker once, whatever it hands on)."""
    turns: list[list[Item]] = []
    pause = runner.pause_worker

    def pause_and_count() -> None:
        turns.append([])
        pause()

    def sink(batch: list[Item]) -> None:
        turns[-1].extend(batch)
        clock.now += card_cost * sum(1 for item in batch if not is_delta(item))

    runner.pause_worker = pause_and_count  # type: ignore[method-assign]
    runner.deliver_to(sink)
    for item in items:
        runner.worker._push(item)
    qtbot.waitUntil(lambda: sum(len(turn) for turn in turns) == len(items), timeout=10_000)
    return [turn for turn in turns if turn]


def is_delta(item: Item) -> bool:
    return isinstance(item, EventItem) and isinstance(item.event, TextDelta)


def test_a_card_that_would_not_fit_waits_for_the_next_turn_of_the_loop(
    qtbot: Any, runner: AgentRunner, clock: Clock
) -> None:
    items: list[Item] = [delta(1, "a"), card(0), delta(2, "b"), card(1), card(2), delta(3, "c")]
    turns = deliver(qtbot, runner, clock, items, card_cost=2 * agent_runner.DRAIN_BUDGET_S)
    assert [item for turn in turns for item in turn] == items  # nothing reordered, nothing lost
    assert [sum(1 for item in turn if not is_delta(item)) for turn in turns] == [1, 1, 1], turns


def test_cheap_items_go_together(qtbot: Any, runner: AgentRunner, clock: Clock) -> None:
    items: list[Item] = [card(index) for index in range(5)]
    turns = deliver(qtbot, runner, clock, items, card_cost=agent_runner.DRAIN_BUDGET_S / 20)
    assert [item for turn in turns for item in turn] == items
    assert turns == [items]  # all in one turn of the loop when they fit
