"""The preview of a data file's first rows: the importer's own reading of a bounded prefix, so its
rows are those Python's csv module reads from the file, and its columns those the table gets."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from sqale_desktop.core.imports import names
from sqale_desktop.core.imports.preview import PREVIEW_BYTES, preview_source
from tests.helpers import shared_data


def _csv_rows(path: Path, encoding: str, delimiter: str = ",") -> list[list[str]]:
    with open(path, encoding=encoding, newline="") as handle:
        return [r for r in csv.reader(handle, delimiter=delimiter) if r]


@pytest.mark.parametrize(
    ("relative", "encoding", "delimiter"),
    [
        # 2 MB, larger than the prefix read: the last row of the prefix is not taken half-read.
        ("files/csv/fivethirtyeight__state_legislative_district_analysis.csv", "utf-8", ","),
        ("files/csv/frictionless__issue-811.csv", "cp1252", ";"),  # cp1252 and ;, 1.1 MB
        ("files/csv/fivethirtyeight__nutrition_raw_anonymized_data.csv", "utf-8", ","),
        ("files/csv/csvkit__test_utf8_bom.csv", "utf-8-sig", ","),
        ("files/csv/csvkit__test_utf16_little.csv", "utf-16", ","),
        ("files/csv/csvkit__mac_newlines.csv", "utf-8", ","),
        ("files/tsv/vega__unemployment.tsv", "utf-8", "\t"),
    ],
)
def test_the_preview_is_the_files_first_rows(relative: str, encoding: str, delimiter: str) -> None:
    path = shared_data(relative)
    preview = preview_source(path)
    assert preview is not None
    expected = _csv_rows(path, encoding, delimiter)
    assert preview.columns == names.unique_columns(expected[0])
    assert preview.rows == expected[1 : 1 + len(preview.rows)]
    assert len(preview.rows) == min(200, len(expected) - 1)
    assert preview.complete == (path.stat().st_size <= PREVIEW_BYTES)


def test_a_gzipped_csv_is_previewed_from_its_decompressed_prefix(tmp_path: Path) -> None:
    source = shared_data("files/csv/fivethirtyeight__state_legislative_district_analysis.csv")
    packed = tmp_path / "districts.csv.gz"
    packed.write_bytes(gzip.compress(source.read_bytes()))
    preview = preview_source(packed)
    assert preview is not None and not preview.complete
    expected = _csv_rows(source, "utf-8")
    assert preview.rows == expected[1:201]


def test_a_prefix_cut_inside_a_quoted_field_shows_only_whole_rows(tmp_path: Path) -> None:
    path = tmp_path / "notes.csv"
    path.write_text('id,note\n1,"one\ntwo"\n2,"a long note that the prefix cuts"\n', encoding="utf-8")
    cut = preview_source(path, max_bytes=40)
    assert cut is not None and not cut.complete
    assert cut.columns == ["id", "note"]
    assert cut.rows == [["1", "one\ntwo"]]


def test_ragged_rows_and_blank_headers_read_as_the_import_names_them() -> None:
    preview = preview_source(shared_data("files/csv/frictionless__blank-headers.csv"))
    assert preview is not None
    assert preview.columns == ["id", "column_2", "age"]
    assert preview.rows[:2] == [["1101", "John", "30"], ["1102", "Julie", "26"]]
    assert all(len(r) == len(preview.columns) for r in preview.rows)


@pytest.mark.parametrize(
    "relative",
    [
        "files/csv/frictionless__empty.csv",
        "files/excel/calamine__any_sheets.xlsx",
        "files/parquet",  # a folder: imported whole, no preview
    ],
)
def test_no_preview_for_what_is_not_delimited_text(relative: str) -> None:
    assert preview_source(shared_data(relative)) is None


def test_no_preview_for_prose_or_binary(tmp_path: Path) -> None:
    prose = tmp_path / "readme.txt"
    prose.write_text("Just a sentence.\nAnd another one here.\n", encoding="utf-8")
    fake = tmp_path / "book.csv"
    fake.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
    assert preview_source(prose) is None
    assert preview_source(fake) is None
