"""``sqale-desktop query --format csv|tsv|json|markdown`` writes what the window exports (issue 11).

The CLI, the file export and the clipboard text all come from ``core.export_formats``; these
tests hold the CLI to the same bytes as the other two for a result with NULL, BLOBs, quotes,
commas, tabs and line breaks in text, 64-bit integers, exact floats, infinities and non-UTF-8 text.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from sqale_desktop.cli import main
from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.export_formats import TextLayout, format_rows
from sqale_desktop.ui.export import export_rows
from tests.awkward_result import COLUMNS, QUERY, make_database


def _refuse_constant(name: str) -> object:
    raise ValueError(f"not JSON: {name}")


@pytest.fixture
def awkward(tmp_path: Path) -> Path:
    return make_database(tmp_path / "awkward.db")


def _query(capsys: pytest.CaptureFixture[str], db: Path, fmt: str) -> str:
    assert main(["query", "--db", str(db), QUERY, "--format", fmt]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out


@pytest.mark.parametrize("fmt", ["csv", "tsv", "json"])
def test_query_prints_the_bytes_of_the_file_export_and_the_clipboard(
    fmt: str, awkward: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _query(capsys, awkward, fmt)
    with open_readonly(awkward) as db:
        rows = db.execute(QUERY).rows
    assert rows[5][1] == "\ufffdA"  # the non-UTF-8 cell really is in the result
    target = tmp_path / f"out.{fmt}"
    export_rows(target, COLUMNS, iter(rows), fmt, newline="\n")  # type: ignore[arg-type]
    exported = target.read_bytes().decode("utf-8")
    clipboard = format_rows(COLUMNS, rows, TextLayout(fmt, newline="\n"))  # type: ignore[arg-type]
    assert exported == clipboard + "\n"
    if fmt != "json":
        assert out == exported
        return
    # JSON: the CLI wraps the rows in {columns, rows, row_count, truncated}; every cell is the same
    # JSON value, digit for digit, as in the file (floats compared as their text).
    document = json.loads(out, parse_constant=_refuse_constant, parse_float=lambda s: ("float", s))
    records = json.loads(exported, parse_constant=_refuse_constant, parse_float=lambda s: ("float", s))
    assert document["columns"] == COLUMNS
    assert document["rows"] == [[record[c] for c in COLUMNS] for record in records]
    assert document["row_count"] == len(rows) and document["truncated"] is False


def test_query_csv_has_one_rule_for_each_kind_of_cell(
    awkward: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    back = list(csv.reader(io.StringIO(_query(capsys, awkward, "csv"), newline="")))
    assert back[0] == COLUMNS
    assert back[1] == ["1", "a,b\tc", "0.1", "X'00FF10'"]
    assert back[2] == ["-9223372036854775808", 'say "hi", ok', "12.037037037037036", "X''"]
    assert back[3] == ["9223372036854775807", "two\nlines", "1e-300", ""]
    assert back[4] == ["0", "cr\r\nlf and lone\rcr", "inf", "X'41'"]
    assert back[5] == ["", "ü€😀", "-inf", ""]
    assert back[6] == ["", "\ufffdA", "", ""]
    assert back[7] == ["42", "", "2.5", "X'01'"]  # a TEXT that reads like a BLOB: the price of one rule
    assert back[8] == ["", "", "", ""]


def test_query_json_is_strict_json(awkward: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _query(capsys, awkward, "json")
    assert "Infinity" not in out and "NaN" not in out
    rows = json.loads(out, parse_constant=_refuse_constant)["rows"]
    assert rows[0] == [1, "a,b\tc", 0.1, "X'00FF10'"]
    assert rows[3][2:] == ["inf", "X'41'"]
    assert rows[4][2] == "-inf"
    assert rows[5][1] == "\ufffdA"
    assert rows[7] == [None, None, None, None]


def test_query_markdown_is_the_grids_copy_as_markdown(
    awkward: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _query(capsys, awkward, "markdown")
    with open_readonly(awkward) as db:
        rows = db.execute(QUERY).rows
    assert out == format_rows(COLUMNS, rows, TextLayout("markdown", newline="\n")) + "\n"
    lines = out.split("\n")
    assert lines[1] == "| ---: | --- | ---: | --- |"
    assert lines[5] == "| 0 | cr<br>lf and lone<br>cr | inf | X'41' |"
    assert len(lines) == 2 + 8 + 1  # header, separator, eight rows, the final line ending
