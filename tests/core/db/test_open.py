"""Opening files: good ones read-only, bad ones with a clear message that names the file."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from sqale_desktop.core.db import (
    CorruptDatabase,
    DatabaseUnreadable,
    NotADatabase,
    QueryFailed,
    open_readonly,
)
from tests.helpers import shared_data


def test_opens_chinook_read_only(chinook: Path) -> None:
    with open_readonly(chinook) as db:
        assert db.path == chinook
        assert not db.immutable
        assert db.notes == []
        result = db.execute("SELECT count(*) FROM Track")
        assert result.columns == ["count(*)"]
        assert result.rows[0][0] > 3000


def test_text_file_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not SQLite\n" * 10)
    with pytest.raises(NotADatabase) as info:
        open_readonly(path)
    assert "notes.txt" in str(info.value)
    assert "not a SQLite database" in str(info.value)


def test_copyright_file_next_to_a_database_is_rejected() -> None:
    with pytest.raises(NotADatabase, match=re.escape("proj_9.1.1.copyright")):
        open_readonly(shared_data("awkward/proj_9.1.1.copyright"))


def test_empty_file_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.touch()
    with pytest.raises(NotADatabase, match="empty"):
        open_readonly(path)


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(DatabaseUnreadable, match="no such file"):
        open_readonly(tmp_path / "missing.db")
    with pytest.raises(NotADatabase, match="folder"):
        open_readonly(tmp_path)
    assert not (tmp_path / "missing.db").exists()


def test_header_only_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "short.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 20)
    with pytest.raises(NotADatabase, match=re.escape("short.db")):
        open_readonly(path)


def test_damaged_pages_report_corruption_naming_the_file(chinook: Path, tmp_path: Path) -> None:
    path = tmp_path / "damaged.sqlite"
    data = bytearray(chinook.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    with open_readonly(chinook) as db:
        (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'Track'").rows[0]
    # An invalid b-tree page type on Track's root page: the schema reads, Track does not.
    data[(root - 1) * page_size] = 0xFF
    path.write_bytes(bytes(data))
    with open_readonly(path) as db, pytest.raises(CorruptDatabase) as info:
        db.execute("SELECT * FROM Track", max_rows=100_000)
    assert "damaged.sqlite" in str(info.value)
    assert "corrupt" in str(info.value)


def test_real_corrupt_file_opens_and_reports_the_bad_table() -> None:
    path = shared_data("awkward/anki_corrupt_diskfull.anki2")
    with open_readonly(path) as db:
        assert db.execute("SELECT count(*) FROM col").rows == [(1,)]
        with pytest.raises(CorruptDatabase, match=re.escape("anki_corrupt_diskfull.anki2 is corrupt")):
            db.execute("SELECT * FROM sqlite_stat1")


def test_sql_errors_are_query_failed(chinook: Path) -> None:
    with open_readonly(chinook) as db:
        with pytest.raises(QueryFailed, match="no such column: Nme"):
            db.execute("SELECT Nme FROM Artist")
        with pytest.raises(QueryFailed, match="syntax error"):
            db.execute("SELEC 1")
        assert db.execute("SELECT 1").rows == [(1,)]


def test_invalid_utf8_text_is_replaced_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "latin1.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (name TEXT)")
    conn.execute("INSERT INTO t VALUES (CAST(X'4361666ee9' AS TEXT))")  # 'Café' in Latin-1
    conn.commit()
    conn.close()
    with open_readonly(path) as db:
        (value,) = db.execute("SELECT name FROM t").rows[0]
    assert value.startswith("Caf") and "\ufffd" in value


def test_path_with_uri_characters(chinook: Path, tmp_path: Path) -> None:
    folder = tmp_path / "odd ?#% name"
    folder.mkdir()
    path = folder / "chinook #1?.sqlite"
    shutil.copyfile(chinook, path)
    with open_readonly(path) as db:
        assert db.execute("SELECT count(*) FROM Artist").rows[0][0] > 0


def test_closed_database_says_so(chinook: Path) -> None:
    db = open_readonly(chinook)
    db.close()
    with pytest.raises(DatabaseUnreadable, match="closed"):
        db.execute("SELECT 1")
