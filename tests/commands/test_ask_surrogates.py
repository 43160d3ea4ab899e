"""Lone surrogates (from a replay script, or a JSON ``\\udXXX`` escape inside a tool call's
arguments) never crash ``ask --json`` / ``--trace``: they are U+FFFD by the time anything prints."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from sqale_desktop.cli import main
from sqale_desktop.core.agent.parser import find_calls
from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.engines.replay import ReplayEngine

QUESTION = "How many genres are there?"
# The first turn's text holds a lone surrogate itself; the second's call carries one as an escape.
SCRIPT = [
    'Tables \ud800 first.\n</think>\n\n{"tool": "list_tables"}',
    "Count.\n</think>\n\n"
    '{"tool": "submit_sql", "args": {"sql": "SELECT COUNT(*) AS \\"g\\udc80\\" FROM Genre"}}',
]


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT), encoding="utf-8")  # json.dumps escapes the surrogate
    return path


@pytest.mark.parametrize("flag", ["--json", "--trace"])
def test_ask_prints_lone_surrogates_as_replacement_characters(
    chinook: Path, script: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["ask", "--db", str(chinook), "--question", QUESTION, "--replay", str(script), flag])
    out = capsys.readouterr().out
    assert status == 0
    assert "\ufffd" in out
    out.encode("utf-8")  # strict: no surrogate left
    if flag == "--json":
        assert json.loads(out)["sql"] == 'SELECT COUNT(*) AS "g\ufffd" FROM Genre'


def test_the_replay_engine_cleans_what_it_generates() -> None:
    session = ReplayEngine(["a\ud800b"]).new_session("prompt")
    text = "".join(session.generate(100, SamplingParams(), threading.Event()))
    assert text == "a\ufffdb"


def test_json_escapes_in_call_arguments_are_cleaned() -> None:
    (call,) = find_calls('{"tool": "describe_table", "args": {"table_name": "x\\ud83d"}}')
    assert call.ok and call.args == {"table_name": "x\ufffd"}
    (call,) = find_calls('{"tool": "run_query", "args": {"sql": "SELECT 1", "\\udfff": 1}}')
    assert "\udfff" not in call.raw + json.dumps(call.args, ensure_ascii=False) + (call.error or "")
