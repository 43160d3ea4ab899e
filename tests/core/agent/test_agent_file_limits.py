"""A hostile sqale_agent.py cannot crash or exhaust the app: it is refused, and the built-in
prompt is used with a note."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqale_desktop.core.agent.protocol import load_protocol
from sqale_desktop.core.agent.sqale_agent_reader import (
    MAX_CONSTANT_CHARS,
    MAX_FILE_BYTES,
    UnsafeAgentFile,
    read_constants,
)

PROMPTS = "SYSTEM_PROMPT = 'You are fine.'\nUSER_TEMPLATE = 'Q: {question}'\n"

HOSTILE = {
    "deep_parentheses": PROMPTS + "X = " + "(" * 5000 + "1" + ")" * 5000 + "\n",
    "deep_negation": PROMPTS + "X = " + "-" * 50_000 + "1\n",
    "long_chain": PROMPTS + "X = " + " + ".join(["'a'"] * 20_000) + "\n",
    "doubling": PROMPTS
    + "A0 = 'x' * 1\nA0 = 'xxxxxxxx'\n"
    + "".join(f"A{i + 1} = A{i} + A{i}\n" for i in range(64)),
    "huge_literal": PROMPTS + "X = '" + "y" * (MAX_CONSTANT_CHARS + 1) + "'\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_file_is_refused_and_the_builtin_prompt_used(tmp_path: Path, name: str) -> None:
    path = tmp_path / "sqale_agent.py"
    path.write_text(HOSTILE[name])
    with pytest.raises((UnsafeAgentFile, SyntaxError)):
        read_constants(path)
    protocol = load_protocol(tmp_path)
    assert protocol.prompt_source == "builtin"
    assert any("using the built-in prompt" in note for note in protocol.notes)


def test_a_file_too_big_is_not_even_read(tmp_path: Path) -> None:
    path = tmp_path / "sqale_agent.py"
    path.write_text(PROMPTS + "#" * MAX_FILE_BYTES)
    with pytest.raises(UnsafeAgentFile, match="bytes, more than"):
        read_constants(path)
    assert load_protocol(tmp_path).prompt_source == "builtin"


def test_ordinary_files_are_still_read(tmp_path: Path) -> None:
    path = tmp_path / "sqale_agent.py"
    path.write_text(PROMPTS + "A = 'x' * 3\nB = 'ab' + 'cd' + 'ef'\nN = 1 + 2 + 3\n")
    constants = read_constants(path)
    assert constants["B"] == "abcdef" and constants["N"] == 6 and "A" not in constants
    assert load_protocol(tmp_path).prompt_source == f"sqale_agent.py:{path}"
