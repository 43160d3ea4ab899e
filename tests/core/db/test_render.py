"""render_cell: the one place cells become text (property tests for hostile values)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from sqale_desktop.core.db.render import DISPLAY_DIGITS, DISPLAY_MAX_CHARS, MODEL_MAX_CHARS, render_cell

cells = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.binary(max_size=5000),
)


def test_known_renderings() -> None:
    assert render_cell(None) == "NULL"
    assert render_cell(None, for_model=True) == "None"
    assert render_cell(b"\x00\x01\x02") == "<blob 3 bytes>"
    assert render_cell(12.037037037037036, for_model=True) == "12.037037037037036"
    assert render_cell(12.037037037037036) == "12.037037037037"  # as the sqlite3 shell prints it
    assert render_cell(1.0) == "1.0"
    assert render_cell(23.9, for_model=True) == "23.9"
    assert render_cell(42) == "42"
    assert render_cell("a\nb", for_model=True) == "a\\nb"
    assert render_cell("a\nb") == "a\nb"
    assert render_cell("x" * 300, for_model=True) == "x" * (MODEL_MAX_CHARS - 1) + "…"
    assert render_cell("abcdef", max_chars=4) == "abc…"


@given(cells, st.booleans(), st.integers(min_value=1, max_value=500))
def test_always_a_bounded_string(value: object, for_model: bool, max_chars: int) -> None:
    text = render_cell(value, for_model=for_model, max_chars=max_chars)
    assert isinstance(text, str)
    if isinstance(value, str):
        assert len(text) <= max_chars
        if len(value) <= max_chars and not for_model:
            assert text == value


@given(cells)
def test_model_text_is_one_line_and_short(value: object) -> None:
    text = render_cell(value, for_model=True)
    assert "\n" not in text and "\r" not in text
    assert len(text) <= max(MODEL_MAX_CHARS, 40)


@given(st.text(min_size=DISPLAY_MAX_CHARS + 1, max_size=DISPLAY_MAX_CHARS + 50))
def test_long_display_text_is_elided(value: str) -> None:
    text = render_cell(value)
    assert len(text) == DISPLAY_MAX_CHARS and text.endswith("…")
    assert value.startswith(text[:-1])


@given(st.binary(max_size=10_000))
def test_blobs_never_leak_bytes(value: bytes) -> None:
    assert render_cell(value) == f"<blob {len(value)} bytes>"
    assert render_cell(memoryview(value), for_model=True) == f"<blob {len(value)} bytes>"


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_round_trip(value: float) -> None:
    text = render_cell(value, for_model=True)
    assert float(text) == value
    assert "." in text or "e" in text  # a float never reads like an integer


@given(st.floats())
def test_nan_and_infinities_render(value: float) -> None:
    text = render_cell(value)
    if math.isnan(value):
        assert text == "nan"
    elif math.isinf(value):
        assert text in {"inf", "-inf"}


def test_people_read_money_not_binary_noise() -> None:
    """Sums of money in binary floats: 15 significant digits for people, the exact double for the model."""
    assert render_cell(523.0600000000003) == "523.06"
    assert render_cell(303.9599999999999) == "303.96"
    assert render_cell(0.1 + 0.2) == "0.3"
    assert render_cell(523.0600000000003, for_model=True) == "523.0600000000003"
    assert render_cell(123456789012345.67) == "123456789012346.0"  # still reads as a float
    assert render_cell(-0.0) == "-0.0" and render_cell(1e20) == "1e+20" and render_cell(5e-324) == "5e-324"


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_displayed_floats_are_the_value_to_15_digits(value: float) -> None:
    text = render_cell(value)
    assert float(text) == float(f"{value:.{DISPLAY_DIGITS}g}")
    assert "." in text or "e" in text  # a float never reads like an integer
    if float(f"{value:.{DISPLAY_DIGITS}g}") == value:
        assert text == repr(value)  # nothing to round: the shortest repr, as before
