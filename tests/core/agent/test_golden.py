"""Golden tests: the exact prompt text of replayed episodes on Chinook.

Each scenario is a script of completions; its whole episode prompt (system and user turns,
assistant openers, completions, tool results, budget lines, exploration-limit message) must equal
the file under ``golden/`` byte for byte, together with how the episode ended.  After a deliberate
change to the protocol or a tool's output format, regenerate with
``SQALE_UPDATE_GOLDEN=1 .venv/bin/pytest tests/core/agent/test_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sqale_desktop.core.agent.events import EpisodeEnded, Event, TextDelta
from sqale_desktop.core.agent.loop import run_episode
from sqale_desktop.core.db import ReadOnlyDatabase, open_readonly
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.tools import ToolBox

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("SQALE_UPDATE_GOLDEN") == "1"
QUESTION = "Which artist has the most albums?"


def call(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


TOP_ARTIST = (
    "SELECT ar.Name, COUNT(*) AS albums FROM Album al JOIN Artist ar ON ar.ArtistId = al.ArtistId "
    "GROUP BY ar.ArtistId ORDER BY albums DESC LIMIT 1"
)

SCENARIOS: dict[str, list[str]] = {
    # several calls in one turn, on one line and across lines, then submit_sql
    "multi_call": [
        "I need the tables first.\n</think>\n\n"
        + call("list_tables")
        + " "
        + call("describe_table", table_name="Album"),
        "Album has ArtistId.\n</think>\n\n"
        + call("join_path", table_a="Album", table_b="Artist")
        + "\n"
        + call("sample_rows", table_name="Artist", limit=2)
        + "\n"
        + call("run_query", sql=TOP_ARTIST),
        "Iron Maiden it is.\n</think>\n\n" + call("submit_sql", sql=TOP_ARTIST),
    ],
    # an unknown tool, missing arguments, broken JSON, prose without a call, a fenced call
    "malformed_calls": [
        "Let me try.\n</think>\n\n"
        '{"tool": "show_schema"}\n{"tool": "describe_table", "args": {}}\n'
        '{"tool": "run_query", "args": {"sql": "SELECT 1}}',
        "I think the answer is in the Album table.\n</think>\n\nThe Album table should have it.",
        "Use a fence this time.\n</think>\n\n```json\n" + call("run_query", sql=TOP_ARTIST) + "\n```",
        "Done.\n</think>\n\n" + call("submit_sql", sql=TOP_ARTIST),
    ],
    # four failed run_query calls in a row end the exploration early; the final answer is a fence
    "error_cap": [
        "Count first.\n</think>\n\n" + call("run_query", sql="SELECT COUNT(*) FROM Album"),
        "Guess a table.\n</think>\n\n"
        + call("run_query", sql="SELECT * FROM Albums")
        + "\n"
        + call("run_query", sql="SELECT Nme FROM Artist"),
        "Try again.\n</think>\n\n"
        + call("run_query", sql="SELECT * FROM Records")
        + "\n"
        + call("list_tables")
        + "\n"
        + call("run_query", sql="SELEC 1"),
        "Final answer.\n</think>\n\n```sql\n" + TOP_ARTIST + "\n```",
    ],
    # six tool turns, the exploration-limit message quoting the last working query, bare SQL answer
    "budget_exhaustion": [
        "Survey.\n</think>\n\n" + call("list_tables"),
        "Inspect.\n</think>\n\n" + call("describe_table", table_name="Artist"),
        "Keys.\n</think>\n\n" + call("foreign_keys", table_name="Album"),
        "Values.\n</think>\n\n" + call("distinct_values", table_name="Genre", column_name="Name", limit=3),
        "Draft.\n</think>\n\n" + call("run_query", sql=TOP_ARTIST),
        "Check.\n</think>\n\n" + call("run_query", sql="SELECT COUNT(*) FROM Artist"),
        "The first query was right.\n</think>\n\n" + TOP_ARTIST,
    ],
    # the final answer does not execute: the last query that ran without error is used
    "final_turn_fallback": [
        "Draft.\n</think>\n\n" + call("run_query", sql=TOP_ARTIST),
        *["Look again.\n</think>\n\n" + call("list_tables")] * 5,
        "Answer.\n</think>\n\nSELECT Name FROM Artists ORDER BY albums DESC",
    ],
    # cancelled while the second completion streams; the turn is closed with <|im_end|>
    "cancellation": [
        "Survey.\n</think>\n\n" + call("list_tables"),
        "Now I will describe every table one by one, starting with Album and then Artist, and",
    ],
}

EXPECTED_END = {
    "multi_call": ("submit_sql", TOP_ARTIST),
    "malformed_calls": ("submit_sql", TOP_ARTIST),
    "error_cap": ("final_turn", TOP_ARTIST),
    "budget_exhaustion": ("final_turn", TOP_ARTIST),
    "final_turn_fallback": ("fallback_to_last_working_query", TOP_ARTIST),
    "cancellation": ("cancelled", None),
}


@pytest.fixture
def db(chinook: Path) -> Iterator[ReadOnlyDatabase]:
    database = open_readonly(chinook)
    yield database
    database.close()


def _episode(db: ReadOnlyDatabase, name: str) -> list[Event]:
    cancel = threading.Event()
    engine = ReplayEngine(SCENARIOS[name], chunk_chars=5)
    events: list[Event] = []
    second_turn_deltas = 0
    for event in run_episode(QUESTION, db, ToolBox(db), engine, cancel=cancel, db_label="chinook.sqlite"):
        events.append(event)
        if isinstance(event, TextDelta) and event.turn == 2:
            second_turn_deltas += 1
        # cancel at the fourth delta of turn 2: deterministic, since the replay's chunks are fixed
        if name == "cancellation" and second_turn_deltas == 4:
            cancel.set()
    return events


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_prompt_text_matches_the_golden_file(db: ReadOnlyDatabase, name: str) -> None:
    events = _episode(db, name)
    last = events[-1]
    assert isinstance(last, EpisodeEnded)
    episode = last.episode
    assert (episode.ended_by, episode.sql) == EXPECTED_END[name]
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        path.write_text(episode.prompt, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}; run with SQALE_UPDATE_GOLDEN=1"
    assert episode.prompt == path.read_text(encoding="utf-8")


def test_cancelled_golden_ends_inside_the_second_turn(db: ReadOnlyDatabase) -> None:
    prompt = (GOLDEN / "cancellation.txt").read_text(encoding="utf-8")
    assert prompt.endswith("Now I will describe <|im_end|>")
    assert prompt.count("<|im_start|>assistant") == 2
