"""Result rows as TSV, CSV, JSON and Markdown text: read back with the standard library."""

from __future__ import annotations

import csv
import io
import json

from sqale_desktop.core.export_formats import column_values, format_rows, platform_newline

COLUMNS = ["id", "name", "blob"]
ROWS = [(1, "a,b\tc", None), (2, 'say "hi"\r\nbye|x', b"\x01\xff"), (3, "lone\rcr", 2.5)]


def test_line_endings_follow_the_platform() -> None:
    assert platform_newline("linux") == "\n"
    assert platform_newline("darwin") == "\n"
    assert platform_newline("win32") == "\r\n"


def test_csv_and_tsv_read_back_with_either_line_ending() -> None:
    for fmt, delimiter in (("csv", ","), ("tsv", "\t")):
        for newline in ("\n", "\r\n"):
            text = format_rows(COLUMNS, ROWS, fmt, newline=newline)  # type: ignore[arg-type]
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
    assert format_rows(["a", "b"], [(1, None), (2, "x")], "tsv", header=False, newline="\n") == "1\t\n2\tx"


def test_json_names_the_columns_and_keeps_types() -> None:
    records = json.loads(format_rows(COLUMNS, ROWS, "json", newline="\n"))
    assert records[0] == {"id": 1, "name": "a,b\tc", "blob": None}
    assert records[1]["blob"] == {"$base64": "Af8="}
    assert records[2]["blob"] == 2.5


def test_markdown_table_escapes_pipes_and_breaks_and_aligns_numbers() -> None:
    text = format_rows(
        ["n", "label"], [(1, "a|b"), (22, "two\nlines"), (None, None)], "markdown", newline="\n"
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
