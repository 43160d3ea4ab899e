"""Each import runs in a new child forked from one warm importer (core.child.forks, Linux): the
children are new processes, the server stays single-threaded (fork is only safe so), and a server
that dies is replaced by the next import; while idle the server forks the next import's child
ahead (a *spare*), which the next import runs in, and a retired server leaves no spare behind."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from sqale_desktop.core import child
from sqale_desktop.core.child import forks
from sqale_desktop.core.imports import import_source
from tests.helpers import children_of, children_running, record_forks, until_warm

pytestmark = pytest.mark.skipif(not forks.available(), reason="fork servers are Linux's")
MODULE = "sqale_desktop.core.imports.isolated"
WAIT_S = 30.0


@pytest.fixture(autouse=True)
def build_in_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Overrides the folder's fixture: these tests are about the child."""
    from sqale_desktop.core.imports import isolated

    monkeypatch.setattr(isolated, "IN_CHILD", True)


def _servers() -> list[int]:
    """The importer servers: this process's children that run the importers' module."""
    return children_running(os.getpid(), MODULE)


def _csv(path: Path, rows: int) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("id,name\n")
        handle.writelines(f"{i},name {i}\n" for i in range(rows))
    return path


@pytest.fixture
def forked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each child a server forked, as (its pid, the server's pid)."""
    return record_forks(monkeypatch)


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


def _one_spare(server: int, other_than: int = 0) -> int:
    """The server's one child once it is idle (its spare), other than ``other_than``."""
    until = time.monotonic() + WAIT_S
    while True:
        found = children_of(server)
        if len(found) == 1 and found[0] != other_than:
            return found[0]
        assert time.monotonic() < until, f"the idle server's children: {found}"
        time.sleep(0.02)


def test_the_idle_importer_server_serves_the_next_import_from_a_child_forked_ahead(
    tmp_path: Path, forked: list[tuple[int, int]]
) -> None:
    child.discard_spares()
    import_source(_csv(tmp_path / "a.csv", 100))
    assert child.wait_warm(MODULE, WAIT_S), "the idle server never finished its warm-up"
    [(first, server)] = forked
    spare = _one_spare(server, other_than=first)
    result = import_source(_csv(tmp_path / "b.csv", 200))
    assert result.tables[0].rows == 200
    assert forked[-1] == (spare, server)  # the import ran in the spare
    next_spare = _one_spare(server, other_than=spare)  # the served one reaped, a new one forked
    child.discard_spares()  # retires the server, which ends once its spare ended and was reaped
    assert not Path(f"/proc/{server}").exists()
    assert not Path(f"/proc/{next_spare}").exists()


def test_an_importer_server_started_ahead_serves_the_next_import(
    tmp_path: Path, forked: list[tuple[int, int]]
) -> None:
    """``isolated.start_ahead`` (the window's Open… dialogs) starts the server in the background:
    it warms up before any import, and the import that follows is forked from it."""
    from sqale_desktop.core.imports import isolated

    child.discard_spares()
    isolated.start_ahead()
    until_warm(MODULE, WAIT_S)
    [server] = _servers()
    isolated.start_ahead()  # once more (the dialog opened again): the same server is kept
    import_source(_csv(tmp_path / "a.csv", 100))
    assert forked == [(forked[0][0], server)] and _servers() == [server]


def test_an_import_starts_the_importer_before_its_own_checks_unless_it_can_reuse_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``import_source`` starts the importers' server at its entry when the file was never
    imported, so that the server's start runs beside the parent's steps (the settings read first,
    then the cache's lock and checks); a file whose import is in the cache starts none."""
    from sqale_desktop.core.imports.limits import ImportLimits

    servers_at_settings: list[list[int]] = []
    saved = ImportLimits.saved.__func__  # type: ignore[attr-defined]

    def recording(cls: type[ImportLimits]) -> ImportLimits:
        servers_at_settings.append(_servers())
        return saved(cls)  # type: ignore[no-any-return]

    monkeypatch.setattr(ImportLimits, "saved", classmethod(recording))
    source = _csv(tmp_path / "a.csv", 100)
    child.discard_spares()
    import_source(source)
    [[server]] = servers_at_settings
    assert _servers() == [server]  # and the import was forked from it
    child.discard_spares()
    servers_at_settings.clear()
    assert import_source(source).tables[0].rows == 100  # reused from the cache
    assert servers_at_settings == [[]] and _servers() == []
