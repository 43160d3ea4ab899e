"""Many constants, each within the per-constant bound, cannot add up to gigabytes: the total of the
file's evaluated text is bounded too (the red team's file: 84,418 constants of 262,144 characters,
~22 GB, ended in MemoryError at 5.8 GB RSS)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqale_desktop.core.agent.protocol import load_protocol
from sqale_desktop.core.agent.sqale_agent_reader import (
    MAX_CONSTANT_CHARS,
    MAX_TOTAL_CHARS,
    UnsafeAgentFile,
    read_constants,
)

PROMPTS = "SYSTEM_PROMPT = 'You are fine.'\nUSER_TEMPLATE = 'Q: {question}'\n"


def _many_big_constants() -> str:
    # A is 2**18 - 1 characters from doublings; every later line is one more name of 2**18
    lines = ["A = 'x'"] + ["A = A + A" for _ in range(17)] + ["A = A + " + repr("y" * (2**17 - 1))]
    lines += [f"B{i}=A+'z'" for i in range(50_000)]  # 50,000 x 262,144 characters: 13 GB
    return PROMPTS + "\n".join(lines) + "\n"


def test_the_total_of_all_constants_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "sqale_agent.py"
    source = _many_big_constants()
    assert len(source) < 1024 * 1024  # within the file bound, every constant within its own
    path.write_text(source, encoding="utf-8")
    assert MAX_CONSTANT_CHARS >= 2**18
    with pytest.raises(UnsafeAgentFile, match=f"more than {MAX_TOTAL_CHARS:,} characters in all"):
        read_constants(path)
    protocol = load_protocol(tmp_path)
    assert protocol.prompt_source == "builtin" and any("sqale_agent.py" in note for note in protocol.notes)


def test_a_real_sized_file_is_far_within_the_total(tmp_path: Path) -> None:
    path = tmp_path / "sqale_agent.py"
    path.write_text(PROMPTS + "LONG = '" + "p" * 20_000 + "'\nALSO = LONG + LONG\n", encoding="utf-8")
    assert len(read_constants(path)["ALSO"]) == 40_000  # type: ignore[arg-type]
