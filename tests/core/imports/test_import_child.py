"""Every import runs in a child process (core.imports.isolated): a file that crashes or floods its
reader is a message naming the file, Stop and a kill leave nothing in the cache or the temp folder,
and progress still reaches the caller."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sqale_desktop.core import child
from sqale_desktop.core.imports import (
    ImportCancelled,
    ImportCrashed,
    ImportFailed,
    ImportProgress,
    cache_folder,
    import_source,
)
from tests.hostile_files import far_corner_workbook


@pytest.fixture(autouse=True)
def build_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Overrides the folder's fixture: these tests are about the child."""
    from sqale_desktop.core.imports import isolated

    monkeypatch.setattr(isolated, "IN_CHILD", True)


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system temp folder, for this test: empty, and checked empty after the import."""
    import tempfile

    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return folder


@pytest.fixture
def small_cap() -> Iterator[None]:
    """The settings' memory cap (the window hands it to the database pool, which sets every
    child's) at 768 MB."""
    from sqale_desktop.core.db import process

    keep = process.POOL.memory_mb
    process.set_memory_limit_mb(768)
    yield
    process.set_memory_limit_mb(keep)


def assert_nothing_left(source: Path, temp_dir: Path) -> None:
    child.discard_spares()  # the next import's child, waiting with its own temp folder
    folder = cache_folder(source)
    left = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    # the cache's own bookkeeping (its lock, its last use) may stay; nothing of the import may
    assert [n for n in left if n not in (".lock", ".last-used")] == [], left
    assert list(temp_dir.iterdir()) == []


def big_csv(path: Path, rows: int = 400_000) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("id,name,amount\n")
        handle.writelines(f"{i},name {i},{i * 0.5}\n" for i in range(rows))
    return path


def test_a_workbook_that_makes_calamine_abort_is_a_message_naming_it(
    tmp_path: Path, temp_dir: Path, small_cap: None
) -> None:
    """1.9 KB of XML asks calamine for 512 GB: Rust aborts its process. That is the child's."""
    source = far_corner_workbook(tmp_path / "corner.xlsx")
    assert source.stat().st_size < 4096
    with pytest.raises(ImportFailed, match=r"corner\.xlsx") as caught:
        import_source(source)
    assert "Traceback" not in str(caught.value)
    assert_nothing_left(source, temp_dir)


def test_a_reader_that_allocates_past_the_cap_is_stopped_by_the_cap(
    tmp_path: Path, temp_dir: Path, small_cap: None
) -> None:
    """XFD10000: a grid of 164 million cells (gigabytes) against a 768 MB cap."""
    source = far_corner_workbook(tmp_path / "wide.xlsx", "XFD10000")
    with pytest.raises(ImportFailed, match=r"wide\.xlsx") as caught:
        import_source(source)
    if isinstance(caught.value, ImportCrashed):
        assert "memory cap" in str(caught.value) or "SIG" in str(caught.value)
    assert_nothing_left(source, temp_dir)


def test_progress_crosses_the_pipe_and_the_database_is_whole(tmp_path: Path, temp_dir: Path) -> None:
    source = big_csv(tmp_path / "sales.csv", 50_000)
    seen: list[ImportProgress] = []
    result = import_source(source, progress=seen.append)
    assert seen and seen[-1].bytes_done == seen[-1].bytes_total == source.stat().st_size
    assert seen[-1].source == "sales.csv"
    with sqlite3.connect(f"file:{result.db_path}?mode=ro", uri=True) as conn:
        assert conn.execute("SELECT count(*), sum(id) FROM sales").fetchone() == (50_000, sum(range(50_000)))
    conn.close()
    assert result.tables[0].rows == 50_000
    child.discard_spares()
    assert list(temp_dir.iterdir()) == []
    assert import_source(source).reused  # the manifest the parent wrote vouches for the child's file


def test_stop_at_the_first_report_leaves_nothing(tmp_path: Path, temp_dir: Path) -> None:
    source = big_csv(tmp_path / "orders.csv")
    stop = threading.Event()
    with pytest.raises(ImportCancelled, match=r"orders\.csv"):
        import_source(source, progress=lambda _p: stop.set(), cancel=stop)
    assert_nothing_left(source, temp_dir)


def _importer_pids() -> list[int]:
    """The importer processes running an import for this process now (Linux's /proc): the
    children of this process that run the importer, and theirs (a fork server's forked
    children), less those with an importer child of their own (a server is not the import)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"sqale_desktop.core.imports.isolated" in cmdline:
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    ours = {pid for pid, ppid in parents.items() if ppid == os.getpid()}
    ours |= {pid for pid, ppid in parents.items() if ppid in ours}
    return sorted(pid for pid in ours if pid not in set(parents.values()))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the child through /proc")
def test_kill_9_of_the_importer_mid_import_is_a_message_and_leaves_nothing(
    tmp_path: Path, temp_dir: Path
) -> None:
    source = big_csv(tmp_path / "killed.csv")
    killed: list[int] = []

    def kill_it(_p: ImportProgress) -> None:
        if not killed:
            killed.extend(_importer_pids())
            for pid in killed:
                os.kill(pid, signal.SIGKILL)

    with pytest.raises(ImportCrashed, match=r"killed\.csv.*SIGKILL"):
        import_source(source, progress=kill_it)
    assert len(killed) == 1
    assert_nothing_left(source, temp_dir)
