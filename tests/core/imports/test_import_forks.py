"""Each import runs in a new child forked from one warm importer (core.child.forks, Linux): the
children are new processes, the server stays single-threaded (fork is only safe so), and a server
that dies is replaced by the next import."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core import child
from sqale_desktop.core.child import forks
from sqale_desktop.core.imports import import_source

pytestmark = pytest.mark.skipif(not forks.available(), reason="fork servers are Linux's")
MODULE = "sqale_desktop.core.imports.isolated"
MARK = MODULE.encode()
WAIT_S = 30.0


@pytest.fixture(autouse=True)
def build_in_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Overrides the folder's fixture: these tests are about the child."""
    from sqale_desktop.core.imports import isolated

    monkeypatch.setattr(isolated, "IN_CHILD", True)


def _servers() -> list[int]:
    """The importer processes that are this process's children (Linux's /proc): the servers."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if MARK in cmdline and int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
            found.append(int(entry.name))
    return sorted(found)


def _csv(path: Path, rows: int) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("id,name\n")
        handle.writelines(f"{i},name {i}\n" for i in range(rows))
    return path


@pytest.fixture
def forked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each child a server forked, as (its pid, the server's pid)."""
    made: list[tuple[int, int]] = []
    fork = forks.Server.fork

    def recorded(server: forks.Server, *args: Any) -> forks.Forked:
        child_process = fork(server, *args)
        made.append((child_process.pid, server.proc.pid))
        return child_process

    monkeypatch.setattr(forks.Server, "fork", recorded)
    return made


def _import(source: Path) -> None:
    result = import_source(source)
    with sqlite3.connect(f"file:{result.db_path}?mode=ro", uri=True) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{result.tables[0].name}"').fetchone()[0] > 0
    conn.close()


def test_each_import_is_a_new_child_forked_from_one_single_threaded_importer(
    tmp_path: Path, forked: list[tuple[int, int]]
) -> None:
    child.discard_spares()
    cpu_before = child.children_cpu_s()
    _import(_csv(tmp_path / "a.csv", 1_000))
    _import(_csv(tmp_path / "b.csv", 1_000))
    [(first, server), (second, same_server)] = forked
    assert first != second and server == same_server and _servers() == [server]
    assert os.listdir(f"/proc/{server}/task") == [str(server)]  # one thread: fork is safe
    assert child.children_cpu_s() > cpu_before  # the server's and its children's CPU is counted
    # Reaped by the server (after the answer, beside the caller's next step; children_cpu_s
    # waited for that): no zombie, no process left.
    assert not Path(f"/proc/{first}").exists() and not Path(f"/proc/{second}").exists()


def test_an_importer_server_that_died_is_replaced_by_the_next_import(
    tmp_path: Path, forked: list[tuple[int, int]]
) -> None:
    _import(_csv(tmp_path / "a.csv", 1_000))
    (_pid, server), *_ = forked
    os.kill(server, signal.SIGKILL)
    until = time.monotonic() + WAIT_S
    while server in _servers():  # a zombie has no command line: gone from the list once dead
        assert time.monotonic() < until, "the killed server never ended"
        time.sleep(0.02)
    _import(_csv(tmp_path / "b.csv", 1_000))
    _pid, new_server = forked[-1]
    assert new_server != server and _servers() == [new_server]


def test_the_importer_server_loads_the_readers_libraries_while_idle(
    tmp_path: Path, forked: list[tuple[int, int]]
) -> None:
    """Ready at once, it imports the readers' libraries between imports: the next import's child
    is forked with calamine and DuckDB (the last library it loads) already in memory, and the
    SQLite driver ADBC opens at a connection (a shared library of its own) loaded too."""
    child.discard_spares()
    _import(_csv(tmp_path / "a.csv", 100))
    (_pid, server), *_ = forked
    assert child.wait_warm(MODULE, WAIT_S), "the idle server never finished its warm-up"
    maps = Path(f"/proc/{server}/maps").read_bytes()
    assert b"calamine" in maps and b"libadbc_driver_sqlite" in maps
    assert os.listdir(f"/proc/{server}/task") == [str(server)]  # and still one thread
