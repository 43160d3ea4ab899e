"""The importers' fork server forks the next import's child ahead, while it is idle (a *spare*,
core.child.forks): the next import is served by that very process, a new spare follows it, and a
retired server leaves no spare behind."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core import child
from sqale_desktop.core.child import forks
from sqale_desktop.core.imports import import_source

pytestmark = pytest.mark.skipif(not forks.available(), reason="fork servers are Linux's")
MODULE = "sqale_desktop.core.imports.isolated"
WAIT_S = 30.0


@pytest.fixture(autouse=True)
def build_in_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Overrides the folder's fixture: these tests are about the child."""
    from sqale_desktop.core.imports import isolated

    monkeypatch.setattr(isolated, "IN_CHILD", True)


@pytest.fixture
def forked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each child a server handed out, as (its pid, the server's pid)."""
    made: list[tuple[int, int]] = []
    fork = forks.Server.fork

    def recorded(server: forks.Server, *args: Any) -> forks.Forked:
        child_process = fork(server, *args)
        made.append((child_process.pid, server.proc.pid))
        return child_process

    monkeypatch.setattr(forks.Server, "fork", recorded)
    return made


def _children(parent: int) -> list[int]:
    """The live processes whose parent is ``parent`` (Linux's /proc; a zombie counts too, until
    it is reaped)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry.name))
    return sorted(found)


def _servers() -> list[int]:
    """The importer servers: this process's children that run the importers' module."""
    found = []
    for pid in _children(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if MODULE.encode() in cmdline:
            found.append(pid)
    return found


def _one_spare(server: int, other_than: int = 0) -> int:
    """The server's one child once it is idle (its spare), other than ``other_than``."""
    until = time.monotonic() + WAIT_S
    while True:
        found = _children(server)
        if len(found) == 1 and found[0] != other_than:
            return found[0]
        assert time.monotonic() < until, f"the idle server's children: {found}"
        time.sleep(0.02)


def _csv(path: Path, rows: int) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("id,name\n")
        handle.writelines(f"{i},name {i}\n" for i in range(rows))
    return path


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
    until = time.monotonic() + WAIT_S
    # Started by a thread: False at once until the server is there, then until it is warm.
    while not child.wait_warm(MODULE, WAIT_S):
        assert time.monotonic() < until, "no importer server was started ahead and warmed up"
        time.sleep(0.02)
    [server] = _servers()
    isolated.start_ahead()  # once more (the dialog opened again): the same server is kept
    import_source(_csv(tmp_path / "a.csv", 100))
    assert forked == [(forked[0][0], server)] and _servers() == [server]
