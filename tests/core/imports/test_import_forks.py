"""Each import runs in a new child forked from one warm importer (core.child.forks, Linux): the
children are new processes, the server stays single-threaded (fork is only safe so), and a server
that dies is replaced by the next import."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from sqale_desktop.core import child
from sqale_desktop.core.child import forks
from sqale_desktop.core.imports import ImportProgress, import_source

pytestmark = pytest.mark.skipif(not forks.available(), reason="fork servers are Linux's")
MARK = b"sqale_desktop.core.imports.isolated"
WAIT_S = 30.0


@pytest.fixture(autouse=True)
def build_in_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Overrides the folder's fixture: these tests are about the child."""
    from sqale_desktop.core.imports import isolated

    monkeypatch.setattr(isolated, "IN_CHILD", True)


def _importers() -> dict[int, int]:
    """Every importer process on the machine and its parent's pid (Linux's /proc)."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if MARK in cmdline:
            found[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def _servers() -> list[int]:
    return sorted(pid for pid, ppid in _importers().items() if ppid == os.getpid())


def _csv(path: Path, rows: int) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("id,name\n")
        handle.writelines(f"{i},name {i}\n" for i in range(rows))
    return path


def _import_seeing_its_child(source: Path) -> tuple[int, int]:
    """Import ``source``; the pid of the process that ran it and that process's parent."""
    seen: list[tuple[int, int]] = []

    def look(_p: ImportProgress) -> None:
        if not seen:
            servers = set(_servers())
            seen.extend((pid, ppid) for pid, ppid in _importers().items() if ppid in servers)

    result = import_source(source, progress=look)
    with sqlite3.connect(f"file:{result.db_path}?mode=ro", uri=True) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{result.tables[0].name}"').fetchone()[0] > 0
    conn.close()
    assert len(seen) == 1, seen
    return seen[0]


def test_each_import_is_a_new_child_forked_from_one_single_threaded_importer(tmp_path: Path) -> None:
    child.discard_spares()
    cpu_before = child.children_cpu_s()
    first, first_parent = _import_seeing_its_child(_csv(tmp_path / "a.csv", 30_000))
    second, second_parent = _import_seeing_its_child(_csv(tmp_path / "b.csv", 30_000))
    assert first != second
    assert first_parent == second_parent and _servers() == [first_parent]
    assert os.listdir(f"/proc/{first_parent}/task") == [str(first_parent)]  # one thread: fork is safe
    assert child.children_cpu_s() > cpu_before  # the forked children's CPU is counted
    assert first not in _importers() and second not in _importers()  # ended and reaped


def test_an_importer_server_that_died_is_replaced_by_the_next_import(tmp_path: Path) -> None:
    _import_seeing_its_child(_csv(tmp_path / "a.csv", 20_000))
    (server,) = _servers()
    os.kill(server, signal.SIGKILL)
    until = time.monotonic() + WAIT_S
    while server in _servers():
        assert time.monotonic() < until, "the killed server was never reaped"
        time.sleep(0.02)
    _pid, parent = _import_seeing_its_child(_csv(tmp_path / "b.csv", 20_000))
    assert parent != server and _servers() == [parent]
