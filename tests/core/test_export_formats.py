"""Result rows as TSV, CSV, JSON and Markdown text: read back with the standard library."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqale_desktop.core import export_formats
from sqale_desktop.core.export_formats import (
    TextLayout,
    cell_text,
    column_values,
    format_rows,
    json_safe,
    json_text,
    json_value,
    platform_newline,
    write_rows,
)

COLUMNS = ["id", "name", "blob"]
ROWS = [(1, "a,b\tc", None), (2, 'say "hi"\r\nbye|x', b"\x01\xff"), (3, "lone\rcr", 2.5)]


def test_line_endings_follow_the_platform() -> None:
    assert platform_newline("linux") == "\n"
    assert platform_newline("darwin") == "\n"
    assert platform_newline("win32") == "\r\n"


def test_csv_and_tsv_read_back_with_either_line_ending() -> None:
    for fmt, delimiter in (("csv", ","), ("tsv", "\t")):
        for newline in ("\n", "\r\n"):
            text = format_rows(COLUMNS, ROWS, TextLayout(fmt, newline=newline))  # type: ignore[arg-type]
            assert not text.endswith(newline)
            back = list(csv.reader(io.StringIO(text + newline, newline=""), delimiter=delimiter))
            assert back == [
                COLUMNS,
                ["1", "a,b\tc", ""],
                ["2", 'say "hi"\r\nbye|x', "X'01FF'"],
                ["3", "lone\rcr", "2.5"],
            ]
            # Only the record separators are bare line endings; the rest sit inside quotes.
            assert text.count(newline) == 4  # three record separators and the one inside row 2's quotes


def test_without_header_and_lf_is_what_linux_pastes() -> None:
    assert (
        format_rows(["a", "b"], [(1, None), (2, "x")], TextLayout("tsv", header=False, newline="\n"))
        == "1\t\n2\tx"
    )


def test_json_names_the_columns_and_keeps_types() -> None:
    records = json.loads(format_rows(COLUMNS, ROWS, TextLayout("json", newline="\n")))
    assert records[0] == {"id": 1, "name": "a,b\tc", "blob": None}
    assert records[1]["blob"] == "X'01FF'"  # issue 11: one BLOB spelling, JSON included
    assert records[2]["blob"] == 2.5


def test_markdown_table_escapes_pipes_and_breaks_and_aligns_numbers() -> None:
    text = format_rows(
        ["n", "label"], [(1, "a|b"), (22, "two\nlines"), (None, None)], TextLayout("markdown", newline="\n")
    )
    assert text.split("\n") == [
        "| n | label |",
        "| ---: | --- |",
        "| 1 | a\\|b |",
        "| 22 | two<br>lines |",
        "| NULL | NULL |",
    ]


def test_column_values_one_a_line() -> None:
    assert column_values(ROWS, 0, newline="\n") == "1\n2\n3"
    assert column_values(ROWS, 2, newline="\r\n") == "\r\nX'01FF'\r\n2.5"


# Issue 11: one exporter, one rule per format, JSON a strict parser accepts. ----------------------

AWKWARD_COLUMNS = ["n", "na,me", 'q"t', "blob"]
AWKWARD_ROWS = [
    (1, "a,b\tc", 'say "hi"', b"\x00\xff\x10"),
    (-(2**63), "two\nlines", "cr\r\nlf", b""),
    (2**63 - 1, "lone\rcr", "ü€😀\ufffdA", None),
    (0.1, 12.037037037037036, 1e-300, "X'01'"),
    (math.inf, -math.inf, math.nan, ""),
    (None, None, None, None),
]


def _refuse_constant(name: str) -> object:
    raise ValueError(f"not JSON: {name}")


def strict_loads(text: str) -> object:
    """``json.loads`` that refuses the NaN/Infinity tokens Python's encoder would write."""
    return json.loads(text, parse_constant=_refuse_constant)


def test_the_strict_parser_really_refuses_python_constants() -> None:
    for token in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(ValueError, match="not JSON"):
            strict_loads(f"[{token}]")


def test_one_rule_for_null_blob_and_floats_in_every_format() -> None:
    assert cell_text(None) == ""
    assert cell_text(b"\x00\xff") == "X'00FF'" == json_value(b"\x00\xff")
    assert cell_text(memoryview(b"\x01")) == "X'01'" == cell_text(bytearray(b"\x01"))
    assert cell_text(b"") == "X''"
    assert json_value(None) is None
    assert cell_text(0.1) == "0.1" and json_value(0.1) == 0.1
    assert [cell_text(v) for v in (math.inf, -math.inf, math.nan)] == ["inf", "-inf", "nan"]
    assert [json_value(v) for v in (math.inf, -math.inf, math.nan)] == ["inf", "-inf", "nan"]


def test_json_is_strict_and_keeps_the_rules() -> None:
    text = format_rows(AWKWARD_COLUMNS, AWKWARD_ROWS, TextLayout("json", newline="\n"))
    records = strict_loads(text)
    assert isinstance(records, list)
    assert records[0] == {"n": 1, "na,me": "a,b\tc", 'q"t': 'say "hi"', "blob": "X'00FF10'"}
    assert records[1]["blob"] == "X''"
    assert records[2]['q"t'] == "ü€😀\ufffdA"  # kept as characters (ensure_ascii=False)
    assert records[4] == {"n": "inf", "na,me": "-inf", 'q"t': "nan", "blob": ""}
    assert records[5] == dict.fromkeys(AWKWARD_COLUMNS)
    assert "Infinity" not in text and "NaN" not in text
    assert strict_loads(json_text({"rows": AWKWARD_ROWS})) == {"rows": [list(r.values()) for r in records]}


def test_a_value_that_slips_past_the_rule_raises_instead_of_writing_infinity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``allow_nan=False`` is what stands behind the rule: without ``json_value``'s conversion the
    encoder must refuse, not write ``Infinity``."""
    monkeypatch.setattr(export_formats, "json_value", lambda value: value)
    with pytest.raises(ValueError, match="not JSON compliant"):
        format_rows(["x"], [(math.inf,)], TextLayout("json"))
    monkeypatch.setattr(export_formats, "json_safe", lambda value: value)
    with pytest.raises(ValueError, match="not JSON compliant"):
        json_text([math.nan])


def test_json_safe_walks_an_episode_shaped_document() -> None:
    document = {"result": {"rows": [(b"\x01", math.inf, None)], "n": 1}, 2: ("x",)}
    assert json_safe(document) == {"result": {"rows": [["X'01'", "inf", None]], "n": 1}, "2": ["x"]}


@pytest.mark.parametrize("fmt", ["csv", "tsv", "json", "markdown"])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_the_clipboard_text_is_the_stream_without_its_last_line_ending(fmt: str, newline: str) -> None:
    stream = io.StringIO()
    count = write_rows(stream, AWKWARD_COLUMNS, iter(AWKWARD_ROWS), TextLayout(fmt, newline=newline))  # type: ignore[arg-type]
    assert count == len(AWKWARD_ROWS)
    clipboard = format_rows(AWKWARD_COLUMNS, AWKWARD_ROWS, TextLayout(fmt, newline=newline))  # type: ignore[arg-type]
    assert stream.getvalue() == clipboard + newline


def test_no_rows() -> None:
    assert format_rows(["a"], [], TextLayout("json")) == "[]"
    assert format_rows(["a"], [], TextLayout("csv")) == "a"
    assert format_rows(["a"], [], TextLayout("tsv", header=False)) == ""


def test_markdown_and_column_values_keep_a_lone_cr_off_the_line_structure() -> None:
    text = format_rows(["a"], [("x\ry",)], TextLayout("markdown", newline="\n"))
    assert text.split("\n")[2] == "| x<br>y |"
    assert column_values([("x\ry",), ("a\r\nb",)], 0, newline="\n") == "x y\na b"


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=8))
@settings(max_examples=80, deadline=None)
def test_floats_round_trip_exactly_through_csv_and_json(values: list[float]) -> None:
    rows = [(v,) for v in values]
    back = list(csv.reader(io.StringIO(format_rows(["x"], rows, TextLayout("csv", newline="\n")) + "\n")))
    assert [float(r[0]) for r in back[1:]] == values
    records = strict_loads(format_rows(["x"], rows, TextLayout("json")))
    assert isinstance(records, list)
    assert [r["x"] for r in records] == values


FORMULAS = ['=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(1)", "\t=1", "\r=1"]


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_formulas_are_sanitized_only_when_asked(fmt: str) -> None:
    rows = [(text, -1, 2.5) for text in FORMULAS] + [("plain", None, b"=")]
    kept = format_rows(["=cmd", "n", "x"], rows, TextLayout(fmt, newline="\n"))  # type: ignore[arg-type]
    read = list(csv.reader(io.StringIO(kept), delimiter="," if fmt == "csv" else "\t"))
    assert [r[0] for r in read[1:-1]] == FORMULAS  # off by default: the data round-trips
    safe = format_rows(["=cmd", "n", "x"], rows, TextLayout(fmt, newline="\n", sanitize_formulas=True))  # type: ignore[arg-type]
    read = list(csv.reader(io.StringIO(safe), delimiter="," if fmt == "csv" else "\t"))
    assert read[0] == ["'=cmd", "n", "x"]
    assert [r[0] for r in read[1:-1]] == ["'" + text for text in FORMULAS]
    assert read[1][1:] == ["-1", "2.5"]  # numbers are never touched
    assert read[-1] == ["plain", "", "X'3D'"]


def test_json_and_markdown_are_not_sanitized() -> None:
    rows = [("=1+1",)]
    assert (
        format_rows(["c"], rows, TextLayout("json", newline="\n", sanitize_formulas=True))
        == '[\n  {"c": "=1+1"}\n]'
    )
