""" "Watch a recorded answer": the recorded demo episode, played through the real loop and tools.

The recording is checked against the demo database and the protocol, so a change to either that
breaks it fails here: every completion parses into valid calls of known tools, the episode has the
trained shape (thinking, several calls in a round, a run_query check, submit_sql), and it ends
with a grid that equals sqlite3's rows for the submitted SQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core.agent.parser import parse_completion
from sqale_desktop.core.demo import DEMO_QUESTIONS, ensure_demo_database
from sqale_desktop.core.history import History
from sqale_desktop.core.settings import Settings
from sqale_desktop.core.tools import TOOL_NAMES
from sqale_desktop.ui.episodes import load_recording
from sqale_desktop.ui.main_window import RECORDING_DELAY_S, MainWindow
from tests.ui.windows import grid_rows, settle


@pytest.fixture
def window(qtbot: Any, tmp_path: Path) -> Iterator[MainWindow]:
    # No model at all: the recording must not need one.
    window = MainWindow(Settings(), None, history=History(tmp_path / "history.sqlite"))
    qtbot.addWidget(window)
    window.show()
    yield window
    assert window.shutdown()


def test_the_recording_has_the_trained_protocol_shape() -> None:
    recording = load_recording()
    assert recording.question == DEMO_QUESTIONS[0].question
    parsed = [parse_completion(text) for text in recording.completions]
    assert all(turn.think_closed and turn.think.strip() for turn in parsed)  # every turn thinks first
    calls = [call for turn in parsed for call in turn.calls]
    assert all(call.error is None and call.tool in TOOL_NAMES for call in calls)
    assert max(len(turn.calls) for turn in parsed) >= 3  # several calls in one round
    tools = [call.tool for call in calls]
    assert tools[0] == "list_tables" and tools[-1] == "submit_sql"
    assert "run_query" in tools[:-1]  # the query is tested before it is submitted
    assert calls[-1].args["sql"] == recording.sql
    # A readable pace: the replay takes seconds, not an instant and not minutes.
    characters = sum(len(text) for text in recording.completions)
    seconds = characters / 8 * RECORDING_DELAY_S
    assert 5 < seconds < 60


def test_watching_the_recording_plays_to_submit_sql_and_the_real_grid(
    qtbot: Any, window: MainWindow, artifacts: Path
) -> None:
    window.recording_delay = 0.0
    with qtbot.waitSignal(window.database_opened, timeout=60_000) as blocker:
        window.open_demo()
    page = blocker.args[0]
    assert page.is_demo and page.chat.watch_button.isVisible() and page.chat.watch_button.isEnabled()
    assert not page.chat.ask_button.isEnabled()  # no model: asking waits, the recording does not
    with qtbot.waitSignal(window.episode_finished, timeout=30_000) as finished:
        page.chat.watch_button.click()
        view = page.chat.current
        assert view is not None and view.recording
        assert view.badge is not None and "Recording" in view.badge.text()
        assert window.status.message_label.text().startswith("Playing the recorded answer")
    episode = finished.args[0]
    assert episode.ended_by == "submit_sql"
    assert view.answer is not None and "submitted by the model" in view.answer.heading.text()
    assert window.status.message_label.text() == "Recording: Answer ready: submitted by the model."
    assert view.progress.text().startswith("recording ·")
    turns = list(view.turns.values())
    assert len(turns) == 5 and max(len(t.cards) for t in turns) >= 3
    assert all(card.ok for card in view.tool_cards())  # the tools really ran on the demo database
    qtbot.waitUntil(lambda: page.sql.model is not None and not page.sql.running, timeout=10_000)
    expected = sqlite3.connect(ensure_demo_database()).execute(load_recording().sql).fetchall()
    assert expected and grid_rows(page) == expected
    assert episode.result is not None and [tuple(r) for r in episode.result.rows] == expected
    window.resize(1024, 700)
    settle()
    window.grab().save(str(artifacts / "recording_1024x700.png"))


def test_a_recording_is_kept_in_the_conversation_as_a_recording(
    qtbot: Any, window: MainWindow, tmp_path: Path
) -> None:
    """Issue 20, item 15: the played recording stays in the demo's conversation, known as one
    (its engine says so), so that a restart shows it badged as a recording, not as the model's."""
    from sqale_desktop.ui.episodes import RECORDED_ENGINE

    window.recording_delay = 0.0
    with qtbot.waitSignal(window.database_opened, timeout=60_000) as blocker:
        window.open_demo()
    page = blocker.args[0]
    with qtbot.waitSignal(window.episode_finished, timeout=30_000):
        page.chat.watch_button.click()
    assert window.history is not None and page.conversation_id is not None
    (entry,) = window.history.entries(page.conversation_id)
    assert entry.episode is not None and entry.episode.stats.engine == RECORDED_ENGINE
    assert entry.episode.ended_by == "submit_sql"
