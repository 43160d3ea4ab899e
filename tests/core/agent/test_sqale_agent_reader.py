"""Reading sqale_agent.py with ast: the strings are found and the file never runs."""

from __future__ import annotations

import textwrap
from pathlib import Path

from sqale_desktop.core.agent.protocol import load_protocol
from sqale_desktop.core.agent.sqale_agent_reader import read_constants


def _hostile_agent(folder: Path, marker: Path) -> Path:
    """A sqale_agent.py that writes ``marker`` and exits if anything executes it."""
    source = f'''
        import os, sys, textwrap
        open({str(marker)!r}, "w").write("executed")
        raise SystemExit("sqale_agent.py must never be executed")

        SYSTEM_PROMPT = textwrap.dedent("""\\
            You are the real agent.
            Tools: list_tables, run_query.
        """).strip()
        _QUESTION_LINE = "Question: {{question}}"
        USER_TEMPLATE = "The schema is hidden.\\n" + _QUESTION_LINE
        MAX_TOOL_TURNS = 5
        MAX_CONSECUTIVE_ERRORS: int = 3
        NAME = f"computed {{os.getpid()}}"
        BUDGET_MSG = "[{{n}} tool turns left before you must answer]"
        FINAL_MSG = (
            "You have reached the exploration limit. Answer now. Last good query:\\n{{last_sql}}"
        )
        def helper():
            return "never looked at"
    '''
    path = folder / "sqale_agent.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def test_constants_are_read_without_running_the_file(tmp_path: Path) -> None:
    marker = tmp_path / "executed.txt"
    path = _hostile_agent(tmp_path, marker)
    constants = read_constants(path)
    assert not marker.exists()
    assert constants["SYSTEM_PROMPT"] == "You are the real agent.\nTools: list_tables, run_query."
    assert constants["USER_TEMPLATE"] == "The schema is hidden.\nQuestion: {question}"
    assert constants["MAX_TOOL_TURNS"] == 5
    assert constants["MAX_CONSECUTIVE_ERRORS"] == 3
    assert "NAME" not in constants  # an f-string needs running code


def test_load_protocol_takes_the_strings_and_limits_from_the_file(tmp_path: Path) -> None:
    marker = tmp_path / "executed.txt"
    path = _hostile_agent(tmp_path, marker)
    protocol = load_protocol(tmp_path)
    assert not marker.exists()
    assert protocol.prompt_source == f"sqale_agent.py:{path}"
    assert protocol.system_prompt.startswith("You are the real agent.")
    assert protocol.user_text("Why?") == "The schema is hidden.\nQuestion: Why?"
    assert (protocol.tool_turns, protocol.max_query_errors) == (5, 3)
    assert protocol.budget_line(3) == "[3 tool turns left before you must answer]"
    assert protocol.exploration_limit_message("SELECT 2").endswith("Last good query:\nSELECT 2")


def test_a_file_without_the_strings_falls_back_to_builtin(tmp_path: Path) -> None:
    (tmp_path / "sqale_agent.py").write_text("SYSTEM_PROMPT = 'only half'\n")
    protocol = load_protocol(tmp_path)
    assert protocol.prompt_source == "builtin"
    assert any("USER_TEMPLATE" in note for note in protocol.notes)


def test_a_file_that_is_not_python_falls_back_to_builtin(tmp_path: Path) -> None:
    (tmp_path / "sqale_agent.py").write_text("def broken(:\n")
    protocol = load_protocol(tmp_path)
    assert protocol.prompt_source == "builtin"
    assert any("SyntaxError" in note for note in protocol.notes)
