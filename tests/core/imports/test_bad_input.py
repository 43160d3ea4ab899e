"""Bad input gets a clear message (an ImportFailed, a known error) and leaves nothing behind."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sqale_desktop.core import paths
from sqale_desktop.core.errors import is_known
from sqale_desktop.core.imports import ImportFailed, import_source


def _fails(path: Path, says: str) -> None:
    with pytest.raises(ImportFailed, match=says) as caught:
        import_source(path)
    assert is_known(caught.value)
    assert not list(paths.cache_dir().rglob("*.sqlite"))


def test_a_binary_file_named_csv(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    # Seeded: a random start can be a byte-order mark, and a BOM'd UTF-16 file is text.
    path.write_bytes(random.Random(20261202).randbytes(4096))
    _fails(path, "is not a text file")


def test_prose_in_a_txt_is_not_a_table_but_a_one_column_csv_is(tmp_path: Path) -> None:
    prose = tmp_path / "notes.txt"
    prose.write_text("this is not a database\n" * 10)
    _fails(prose, "plain text with no column delimiter")
    column = tmp_path / "names.csv"
    column.write_text("name\nAda\nGrace\n")
    assert import_source(column).tables[0].rows == 2


def test_a_parquet_file_named_csv(files: Path, tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes((files / "parquet/duckdb__userdata1.parquet").read_bytes())
    _fails(path, "it is a Parquet file")


def test_a_password_protected_workbook(tmp_path: Path) -> None:
    """Excel saves an encrypted .xlsx as an OLE2 compound file, not a ZIP (MS-OFFCRYPTO)."""
    path = tmp_path / "secret.xlsx"
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504) + b"EncryptionInfo")
    _fails(path, "password-protected")


def test_a_workbook_that_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "fake.xlsx"
    path.write_text("not a zip", encoding="utf-8")
    _fails(path, "not a readable workbook")


def test_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[{"a": 1}, {"a": ', encoding="utf-8")
    _fails(path, "not valid JSON")


def test_invalid_json_lines_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{oops}\n', encoding="utf-8")
    _fails(path, "line 3 is not valid JSON")


def test_a_missing_file(tmp_path: Path) -> None:
    _fails(tmp_path / "gone.csv", "does not exist")


def test_an_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("hello", encoding="utf-8")
    _fails(tmp_path, "holds no CSV")


def test_an_empty_and_a_header_only_file(files: Path) -> None:
    _fails(files / "csv/frictionless__empty.csv", "is empty")
    assert import_source(files / "csv/frictionless__without-rows.csv").tables[0].rows == 0


def test_an_unquoted_line_break_in_a_quoted_field_at_the_end(tmp_path: Path) -> None:
    """An unterminated quote swallows the rest of the file; the row is kept, not lost."""
    path = tmp_path / "open_quote.csv"
    path.write_text('a,b\n1,"never closed\n2,3\n', encoding="utf-8")
    result = import_source(path)
    assert result.tables[0].rows == 1
