"""The tool calls of one turn share a time budget: slow calls are stopped, later ones skipped."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core.agent.events import EpisodeEnded, ToolResulted
from sqale_desktop.core.agent.loop import (
    DEFAULT_TURN_TOOL_SECONDS,
    run_episode,
    skipped_call_message,
    stopped_call_message,
)
from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.tools import ToolBox

RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def call(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


def turn(*calls: str) -> str:
    return "Plan.\n</think>\n\n" + "\n".join(calls)


class SlowToolBox(ToolBox):
    """Every list_tables call takes ``delay`` seconds, like a slow query would."""

    def __init__(self, *args: Any, delay: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delay = delay
        self.calls = 0

    def list_tables(self) -> Any:
        self.calls += 1
        time.sleep(self.delay)
        return super().list_tables()


def _results(events: list[Any]) -> list[ToolResulted]:
    return [e for e in events if isinstance(e, ToolResulted)]


def test_calls_after_the_budget_is_spent_are_skipped_with_a_message(chinook: Path) -> None:
    script = [
        turn(*[call("list_tables")] * 6),
        turn(call("submit_sql", sql="SELECT COUNT(*) FROM Artist")),
    ]
    with open_readonly(chinook) as db:
        toolbox = SlowToolBox(db, delay=0.3)
        events = list(run_episode("q", db, toolbox, ReplayEngine(script), turn_tool_seconds=0.2))
    results = _results(events)
    assert toolbox.calls == 1  # the first call spent the budget; the other five never ran
    assert [r.ok for r in results] == [True, False, False, False, False, False, True]
    assert all(r.output == skipped_call_message(0.2) for r in results[1:6])
    episode = events[-1].episode if isinstance(events[-1], EpisodeEnded) else None
    assert episode is not None and episode.ended_by == "submit_sql"
    assert skipped_call_message(0.2) in episode.prompt


def test_a_query_running_past_the_budget_is_stopped_and_does_not_count_as_a_query_error(
    chinook: Path,
) -> None:
    script = [
        turn(call("run_query", sql=RUNAWAY), call("run_query", sql="SELECT 1")),
        turn(call("submit_sql", sql="SELECT COUNT(*) FROM Artist")),
    ]
    with open_readonly(chinook, time_limit_s=60) as db:
        events = list(run_episode("q", db, ToolBox(db), ReplayEngine(script), turn_tool_seconds=0.3))
    results = _results(events)
    assert [r.output for r in results[:2]] == [stopped_call_message(0.3), skipped_call_message(0.3)]
    last = events[-1]
    assert isinstance(last, EpisodeEnded) and last.episode.ended_by == "submit_sql"


def test_the_budget_is_per_turn_and_normal_turns_never_meet_it(chinook: Path) -> None:
    script = [
        turn(*[call("list_tables")] * 3),
        turn(*[call("run_query", sql="SELECT 1")] * 3),
        turn(call("submit_sql", sql="SELECT 1")),
    ]
    with open_readonly(chinook) as db:
        events = list(run_episode("q", db, ToolBox(db), ReplayEngine(script)))
    assert all(r.ok for r in _results(events))
    assert DEFAULT_TURN_TOOL_SECONDS == 30.0


def test_the_budget_must_be_positive(chinook: Path) -> None:
    with open_readonly(chinook) as db, pytest.raises(ValueError):
        list(run_episode("q", db, ToolBox(db), ReplayEngine([]), turn_tool_seconds=0))


def test_a_question_and_path_with_undecodable_bytes_give_valid_text(chinook: Path) -> None:
    script = [turn(call("submit_sql", sql="SELECT 1"))]
    with open_readonly(chinook) as db:
        events = list(
            run_episode("Why \udcff?", db, ToolBox(db), ReplayEngine(script), db_label="x\udcfe.db")
        )
    last = events[-1]
    assert isinstance(last, EpisodeEnded)
    episode = last.episode
    json.dumps(episode.to_json(), ensure_ascii=False).encode("utf-8")  # strict: what --json prints
    assert episode.question == "Why \ufffd?" and episode.db == "x\ufffd.db"
