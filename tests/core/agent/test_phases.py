"""Think/answer labelling survives tags split across stream deltas."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sqale_desktop.core.agent.phases import PhaseSplitter


def _run(chunks: list[str], starts_in_think: bool) -> list[tuple[str, str]]:
    splitter = PhaseSplitter(starts_in_think)
    pieces = [piece for chunk in chunks for piece in splitter.feed(chunk)]
    return pieces + splitter.flush()


def _by_phase(pieces: list[tuple[str, str]], phase: str) -> str:
    return "".join(text for text, p in pieces if p == phase)


def test_a_close_tag_cut_in_two_still_switches_phase() -> None:
    pieces = _run(["plan the qu", "ery</thi", 'nk>\n{"tool"', ': "list_tables"}'], starts_in_think=True)
    assert _by_phase(pieces, "think") == "plan the query</think>"
    assert _by_phase(pieces, "answer") == '\n{"tool": "list_tables"}'


def test_a_model_that_opens_its_own_think_block() -> None:
    pieces = _run(["<th", "ink>hm</think>ok"], starts_in_think=False)
    assert _by_phase(pieces, "think") == "<think>hm</think>"
    assert _by_phase(pieces, "answer") == "ok"


def test_a_lone_angle_bracket_is_released_at_the_end() -> None:
    pieces = _run(["a <", "/"], starts_in_think=True)
    assert _by_phase(pieces, "think") == "a </"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["<think>", "</think>", "x", "<", "/", "think", ">", "\n"]), max_size=30).map(
        "".join
    ),
    st.lists(st.integers(min_value=0, max_value=40), max_size=10),
    st.booleans(),
)
def test_any_chunking_gives_the_same_labels_as_one_piece(text: str, cuts: list[int], starts: bool) -> None:
    points = sorted({min(c, len(text)) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    whole = _run([text], starts)
    split = _run(chunks, starts)
    assert "".join(t for t, _ in split) == text
    assert _by_phase(split, "think") == _by_phase(whole, "think")
    assert _by_phase(split, "answer") == _by_phase(whole, "answer")
