"""The episode controller routes a runner's items to the tab that asked and to the history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core.agent.events import Episode, Event, TurnStarted
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.history import History
from sqale_desktop.core.runtime import ModelChoice, resolve
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.agent_runner import AgentRunner
from sqale_desktop.ui.episode_controller import EpisodeController
from tests.ui.runtimes import scripted

SCRIPT = [
    '</think>{"tool": "list_tables"}',
    '</think>{"tool": "submit_sql", "args": {"sql": "SELECT COUNT(*) FROM Genre"}}',
]


class FakeView:
    """A live episode's view, as the controller keeps it (it remembers each view's entry)."""


class FakeChat:
    """What the controller asks of a page's chat, recorded."""

    def __init__(self) -> None:
        self.current: Any = None
        self.events: list[Event] = []
        self.ended: list[tuple[Episode | None, str | None]] = []

    def pending_follow_up(self) -> None:
        return None  # every question here is standalone

    def begin(self, question: str, recording: bool = False) -> object:
        self.current = FakeView()
        return self.current

    def apply(self, events: list[Event]) -> None:
        self.events.extend(events)

    def end(self, episode: Episode | None, error: str | None) -> None:
        self.ended.append((episode, error))


class FakePage:
    def __init__(self, path: Path, conversation_id: int | None) -> None:
        self.path, self.conversation_id, self.chat = path, conversation_id, FakeChat()
        self.source = path  # a database file: what the person opened is what the agent reads


@pytest.mark.parametrize("recording", [False, True])
def test_events_reach_the_asking_page_and_the_history(
    qtbot: Any, chinook: Path, tmp_path: Path, recording: bool
) -> None:
    history = History(tmp_path / "h.sqlite")
    conversation = history.conversation_for(chinook, title=chinook.name)

    def model() -> ReplayEngine:
        assert not recording, "a recording must not use the model"
        return ReplayEngine(SCRIPT)

    runner = AgentRunner(scripted(model))
    controller = EpisodeController(runner, history)
    asking, other = FakePage(chinook, conversation.id), FakePage(chinook, None)
    finished: list[tuple[Any, Any, str, bool]] = []
    controller.finished.connect(lambda *args: finished.append(args))
    contexts: list[int] = []
    controller.context_used.connect(contexts.append)
    try:
        # The recording is a runtime choice of its own: it runs on its own engine, not the runner's.
        recorded = resolve(Settings(), ModelChoice("recording", completions=tuple(SCRIPT)))
        runtime = recorded if recording else None
        controller.start(asking, "How many genres?", runtime)  # type: ignore[arg-type]
        assert controller.busy and controller.running_page() is asking
        qtbot.waitUntil(lambda: bool(finished), timeout=20_000)
    finally:
        assert runner.shutdown()
    page, episode, error, was_recording = finished[0]
    assert (page, error, was_recording) == (asking, "", recording)
    assert (episode.ended_by, episode.sql) == ("submit_sql", "SELECT COUNT(*) FROM Genre")
    assert not controller.busy and controller.running_page() is None
    assert any(isinstance(e, TurnStarted) for e in asking.chat.events) and other.chat.events == []
    assert asking.chat.ended == [(episode, None)]
    assert contexts and contexts == sorted(contexts)
    entries = history.entries(conversation.id)
    # A recording is kept too (issue 20, item 15): its engine marks it, so it comes back as one.
    assert [(e.question, e.ended_by) for e in entries] == [("How many genres?", "submit_sql")]
