"""A WAL database in a read-only folder falls back to an immutable snapshot.

Tests run as root here, and root may write into a folder whatever its mode says, so chmod alone
does not make SQLite fail.  Three checks cover the path:
- a folder with no write bits: the app treats it as read-only on purpose and never creates the
  ``-shm`` file there (checked: no ``-shm`` appears);
- a real read-only bind mount (``unshare --mount``), where creating ``-shm`` really fails, run in
  a child process; skipped where unshare/mount are not permitted;
- in that mount, the folder check forced to say "writable", so the open really attempts the
  ``mode=ro`` read, gets SQLite's error and takes the fallback.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.db.opening import STALE_NOTE
from tests.helpers import REPO_ROOT, shared_data

NEW_TABLE = "NewTable"  # exists only in the -wal file


def _copy_wal_pair(folder: Path) -> Path:
    source = shared_data("awkward/wal/wal_database.db")
    folder.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{source}{suffix}", folder / f"wal_database.db{suffix}")
    return folder / "wal_database.db"


def _tables(db_path: Path) -> tuple[bool, list[str], list[str]]:
    with open_readonly(db_path) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").rows]
        return db.immutable, db.notes, names


def test_writable_folder_reads_the_wal(tmp_path: Path) -> None:
    path = _copy_wal_pair(tmp_path / "rw")
    immutable, notes, names = _tables(path)
    assert not immutable
    assert notes == []
    assert NEW_TABLE in names


def test_folder_without_write_bits_opens_immutable_and_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    path = _copy_wal_pair(folder)
    before = sorted(p.name for p in folder.iterdir())
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    try:
        immutable, notes, names = _tables(path)
    finally:
        folder.chmod(0o755)
    assert immutable
    assert notes == [STALE_NOTE]
    assert "stale" in notes[0]
    assert "MyTable" in names
    assert NEW_TABLE not in names  # the snapshot ignores the -wal file: the view is stale
    assert sorted(p.name for p in folder.iterdir()) == before  # no -shm was created


def test_shared_wal_database_is_read_without_touching_its_folder() -> None:
    path = shared_data("awkward/wal/wal_database.db")
    before = sorted(os.listdir(path.parent))
    immutable, _notes, names = _tables(path)
    assert "MyTable" in names
    assert sorted(os.listdir(path.parent)) == before
    if not os.access(path.parent, os.W_OK) or not path.parent.stat().st_mode & 0o222:
        assert immutable


_CHILD = """
import sys
from sqale_desktop.core.db import connection, open_readonly
if sys.argv[2] == "force":
    connection.inspect_file.__globals__["folder_is_writable"] = lambda folder: True
db = open_readonly(sys.argv[1])
names = [r[0] for r in db.execute("SELECT name FROM sqlite_master").rows]
print(db.immutable, "NewTable" in names, "MyTable" in names)
"""


def _run_in_read_only_mount(folder: Path, mode: str) -> str:
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not available")
    script = (
        f"mount --bind -o ro '{folder}' '{folder}' && "
        f"'{sys.executable}' -c '{_CHILD}' '{folder / 'wal_database.db'}' {mode}"
    )
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
    )
    if done.returncode != 0 and ("mount" in done.stderr or "unshare" in done.stderr):
        pytest.skip(f"read-only bind mounts are not permitted here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("mode", ["detect", "force"])
def test_real_read_only_mount_falls_back_to_immutable(tmp_path: Path, mode: str) -> None:
    folder = tmp_path / "mounted"
    _copy_wal_pair(folder)
    assert _run_in_read_only_mount(folder, mode) == "True False True"
    assert sorted(p.name for p in folder.iterdir()) == ["wal_database.db", "wal_database.db-wal"]
