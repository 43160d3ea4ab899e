"""The imported database lives in the cache, is reused while the source is unchanged, is built
again (with a note) when it changes, and nothing half-written is ever kept or reused."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core import paths
from sqale_desktop.core.imports import (
    ImportCancelled,
    ImportFailed,
    ImportProgress,
    import_source,
    resolve_database,
)
from sqale_desktop.core.imports import builder as builder_mod
from tests.helpers import fingerprint


def _csv(path: Path, n: int) -> Path:
    path.write_text(
        "id,name,zip\n" + "".join(f"{i},name {i},0{i % 9000:04d}\n" for i in range(n)), encoding="utf-8"
    )
    return path


def test_the_import_is_in_the_cache_and_reused_while_unchanged(tmp_path: Path, rows: Any) -> None:
    source = _csv(tmp_path / "people.csv", 10)
    before = fingerprint(source)
    first = import_source(source)
    assert paths.cache_dir() in first.db_path.parents
    assert sorted(p.name for p in tmp_path.iterdir()) == ["people.csv"]  # nothing beside the source
    assert not first.reused
    inode = first.db_path.stat().st_ino
    second = import_source(source)
    assert second.reused and second.db_path == first.db_path
    assert second.db_path.stat().st_ino == inode  # the same file, not built again
    assert fingerprint(source) == before
    assert rows(second.db_path, "SELECT zip FROM people WHERE id = 3") == [("00003",)]


def test_a_changed_source_is_imported_again_with_a_note(tmp_path: Path, rows: Any) -> None:
    source = _csv(tmp_path / "people.csv", 10)
    import_source(source)
    _csv(source, 20)
    again = import_source(source)
    assert not again.reused
    assert again.notes[0] == "people.csv changed since it was imported: imported again"
    assert rows(again.db_path, "SELECT COUNT(*) FROM people") == [(20,)]


def test_same_size_and_time_but_new_content_is_caught_by_the_hash(tmp_path: Path, rows: Any) -> None:
    source = _csv(tmp_path / "people.csv", 10)
    import_source(source)
    stat = source.stat()
    source.write_text(source.read_text(encoding="utf-8").replace("name 5", "nome 5"), encoding="utf-8")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again = import_source(source)
    assert not again.reused
    assert "new content" in again.notes[0]
    assert rows(again.db_path, "SELECT name FROM people WHERE id = 5") == [("nome 5",)]


def test_a_sqlite_file_resolves_to_itself(chinook: Path) -> None:
    assert resolve_database(chinook) == (chinook, None)


def test_progress_reports_rows_and_bytes(tmp_path: Path) -> None:
    source = _csv(tmp_path / "big.csv", 60_000)
    seen: list[ImportProgress] = []
    import_source(source, progress=seen.append)
    assert seen
    assert all(p.bytes_total == source.stat().st_size for p in seen)
    assert [p.rows for p in seen] == sorted(p.rows for p in seen)
    assert (seen[-1].rows, seen[-1].bytes_done) == (60_000, source.stat().st_size)
    assert seen[-1].line().startswith("Importing big.csv: 60,000 rows")


def test_the_last_report_is_the_whole_source_whatever_the_throttle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reports are at most one per interval; the import's end is reported anyway (the bar full)."""
    from sqale_desktop.core.imports import progress

    monkeypatch.setattr(progress, "REPORT_INTERVAL_S", 3600.0)
    source = _csv(tmp_path / "big.csv", 60_000)
    seen: list[ImportProgress] = []
    import_source(source, progress=seen.append)
    assert seen and (seen[-1].rows, seen[-1].fraction) == (60_000, 1.0)


def test_cancel_mid_import_keeps_nothing(tmp_path: Path) -> None:
    source = _csv(tmp_path / "big.csv", 60_000)
    cancel = threading.Event()

    def progress(p: ImportProgress) -> None:
        if p.rows >= 20_000:
            cancel.set()  # as Stop does, from another thread, while the rows stream

    folder_before = set(paths.cache_dir().rglob("*"))
    with pytest.raises(ImportCancelled, match="stopped; nothing was kept"):
        import_source(source, progress=progress, cancel=cancel)
    left = {p for p in paths.cache_dir().rglob("*") if p.is_file()} - folder_before
    assert not [p for p in left if p.suffix in (".sqlite", ".json", ".stage")]
    # and the next open imports the whole file, not a cancelled half
    result = import_source(source)
    assert not result.reused and result.tables[0].rows == 60_000


def test_a_file_that_disappears_mid_import(tmp_path: Path) -> None:
    source = _csv(tmp_path / "big.csv", 60_000)

    def progress(p: ImportProgress) -> None:
        if source.exists():
            source.unlink()

    with pytest.raises(ImportFailed, match="disappeared while it was being imported"):
        import_source(source, progress=progress)
    assert not list(paths.cache_dir().rglob("*.sqlite"))


def test_a_file_that_changes_mid_import(tmp_path: Path) -> None:
    source = _csv(tmp_path / "big.csv", 60_000)
    done = []

    def progress(p: ImportProgress) -> None:
        if not done:
            done.append(1)
            with open(source, "a", encoding="utf-8") as handle:
                handle.write("999999,late,00001\n")

    with pytest.raises(ImportFailed, match="changed while it was being imported"):
        import_source(source, progress=progress)
    assert not list(paths.cache_dir().rglob("*.sqlite"))


def test_a_full_disk_gets_a_clear_message_and_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's own SQLITE_FULL, made real by a page limit on the file being built."""
    source = _csv(tmp_path / "big.csv", 60_000)
    real_open = builder_mod.open_build

    def small_disk(path: Path, write_bytes: int) -> Any:
        conn = real_open(path, write_bytes)
        conn.execute("PRAGMA stage.max_page_count = 20")
        return conn

    monkeypatch.setattr(builder_mod, "open_build", small_disk)
    with pytest.raises(ImportFailed, match="is full; free some space"):
        import_source(source)
    assert not list(paths.cache_dir().rglob("*.sqlite"))
    assert not list(paths.cache_dir().rglob("*.stage"))


def test_a_read_only_source_folder(tmp_path: Path, rows: Any) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    source = _csv(folder / "people.csv", 5)
    folder.chmod(0o555)
    try:
        result = import_source(source)
        assert rows(result.db_path, "SELECT COUNT(*) FROM people") == [(5,)]
    finally:
        folder.chmod(0o755)


def test_gzipped_text(tmp_path: Path, rows: Any) -> None:
    import gzip

    plain = _csv(tmp_path / "people.csv", 100)
    packed = tmp_path / "packed.csv.gz"
    with gzip.open(packed, "wb") as handle:
        handle.write(plain.read_bytes())
    result = import_source(packed)
    assert result.tables[0].name == "packed"
    assert rows(result.db_path, "SELECT COUNT(*), SUM(id) FROM packed") == [(100, sum(range(100)))]


def test_a_copy_of_a_real_file_keeps_its_own_cache(files: Path, tmp_path: Path) -> None:
    copy = tmp_path / "pollster.csv"
    shutil.copyfile(files / "csv/fivethirtyeight__pollster-ratings-2019.csv", copy)
    a = import_source(copy)
    b = import_source(files / "csv/fivethirtyeight__pollster-ratings-2019.csv")
    assert a.db_path != b.db_path


def test_gzipped_json_lines_and_a_bar_separated_txt(tmp_path: Path, rows: Any) -> None:
    import gzip

    packed = tmp_path / "events.ndjson.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write('{"id": 1, "ok": true}\n{"id": 2, "ok": false}\n')
    result = import_source(packed)
    assert rows(result.db_path, "SELECT id, ok FROM events ORDER BY id") == [(1, 1), (2, 0)]
    text = tmp_path / "export.txt"
    text.write_text("a|b\n1|x\n2|y\n", encoding="utf-8")
    assert rows(import_source(text).db_path, "SELECT a, b FROM export") == [(1, "x"), (2, "y")]
