"""The standalone Ask is the trained episode, byte for byte, through the runtime's episode function.

``golden/standalone_runtime.txt`` was written by the code as it stood before follow-up questions
existed (issue 29), through :func:`sqale_desktop.core.runtime.episode_fn` with default settings:
a plain question must keep producing exactly that prompt, whatever follow-ups add to the loop.
Regenerate only after a deliberate change to the protocol, as ``test_golden`` says.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from sqale_desktop.core import runtime
from sqale_desktop.core.agent.events import EpisodeEnded
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.settings import Settings

GOLDEN = Path(__file__).parent / "golden" / "standalone_runtime.txt"
UPDATE = os.environ.get("SQALE_UPDATE_GOLDEN") == "1"
QUESTION = "How many tracks does the longest album have?"
LONGEST = "SELECT COUNT(*) AS tracks FROM Track GROUP BY AlbumId ORDER BY tracks DESC LIMIT 1"


def _call(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


SCRIPT = [
    "Tables first.\n</think>\n\n" + _call("list_tables"),
    "Track has AlbumId.\n</think>\n\n" + _call("describe_table", table_name="Track"),
    "Count them.\n</think>\n\n" + _call("run_query", sql=LONGEST),
    "Done.\n</think>\n\n" + _call("submit_sql", sql=LONGEST),
]


def test_a_standalone_question_keeps_the_trained_prompt(chinook: Path) -> None:
    run = runtime.episode_fn(Settings())
    database = runtime.open_tool_database(chinook, 30.0)
    try:
        events = list(run(ReplayEngine(SCRIPT), database, QUESTION, threading.Event()))
    finally:
        database.close()
    last = events[-1]
    assert isinstance(last, EpisodeEnded)
    assert (last.episode.ended_by, last.episode.sql) == ("submit_sql", LONGEST)
    if UPDATE:
        GOLDEN.write_text(last.episode.prompt, encoding="utf-8")
    assert GOLDEN.exists(), f"missing golden file {GOLDEN}; run with SQALE_UPDATE_GOLDEN=1"
    assert last.episode.prompt == GOLDEN.read_text(encoding="utf-8")
    assert last.episode.prompt.count("<|im_start|>system") == 1
    assert last.episode.prompt.count("<|im_start|>user\n") == 4  # the question and three tool results
