"""CSV and JSON export: read back with the standard library; a cancelled export leaves no file."""

from __future__ import annotations

import csv
import json
import threading
from pathlib import Path

import pytest

from sqale_desktop.ui.export import ExportCancelled, export_rows

COLS = ["id", "name", "blob"]
MORE = [(1, "a,b\tc", None), (2, 'say "hi"\r\nbye|x', b"\x01\xff"), (3, "lone\rcr", 2.5)]
ROWS = [(1, "a,b", None), (2, 'quote "q"\nline', b"\x01\xff"), (3, "ü", 2.5)]


def test_csv_round_trip(tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    assert export_rows(target, ["id", "text", "extra"], iter(ROWS), "csv") == 3
    with target.open(newline="", encoding="utf-8") as handle:
        back = list(csv.reader(handle))
    assert back == [
        ["id", "text", "extra"],
        ["1", "a,b", ""],
        ["2", 'quote "q"\nline', "X'01FF'"],
        ["3", "ü", "2.5"],
    ]


def test_json_round_trip(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    export_rows(target, ["id", "text", "extra"], iter(ROWS), "json")
    back = json.loads(target.read_text(encoding="utf-8"))
    assert back[0] == {"id": 1, "text": "a,b", "extra": None}
    assert back[1]["extra"] == "X'01FF'"  # issue 11: one BLOB spelling, JSON included
    assert back[2]["extra"] == 2.5


def test_empty_json_is_an_empty_array(tmp_path: Path) -> None:
    target = tmp_path / "empty.json"
    assert export_rows(target, ["a"], iter([]), "json") == 0
    assert json.loads(target.read_text()) == []


def test_cancelled_export_leaves_nothing(tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    target = tmp_path / "never.csv"
    with pytest.raises(ExportCancelled):
        export_rows(target, ["a"], iter([(1,)] * 10), "csv", cancel)
    assert list(tmp_path.iterdir()) == []


def test_csv_file_with_rfc4180_line_endings(tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    assert export_rows(target, COLS, iter(MORE), "csv", newline="\r\n") == 3
    raw = target.read_bytes()
    assert raw.startswith(b"id,name,blob\r\n1,")
    assert raw.endswith(b"2.5\r\n")
    lf = tmp_path / "lf.tsv"
    export_rows(lf, COLS, iter(MORE), "tsv", newline="\n")
    with lf.open(newline="", encoding="utf-8") as handle:
        assert list(csv.reader(handle, delimiter="\t"))[3] == ["3", "lone\rcr", "2.5"]
    assert lf.read_bytes().startswith(b"id\tname\tblob\n")


def test_the_saved_setting_sanitizes_csv_formulas(tmp_path: Path) -> None:
    import dataclasses

    from sqale_desktop.core import settings

    path = tmp_path / "out.csv"
    export_rows(path, ["c"], [("=1+1",)], "csv", newline="\n")
    assert path.read_text(encoding="utf-8") == "c\n=1+1\n"
    settings.save(dataclasses.replace(settings.Settings(), csv_formulas="sanitize"))
    export_rows(path, ["c"], [("=1+1",)], "csv", newline="\n")
    assert path.read_text(encoding="utf-8") == "c\n'=1+1\n"
