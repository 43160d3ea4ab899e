"""Qt tests run offscreen; every test fails if it leaves a worker thread running."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from collections.abc import Iterator
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


@pytest.fixture(autouse=True)
def no_thread_left_running(qapp: object) -> Iterator[None]:
    yield
    from sqale_desktop.ui.workers import busy_thread_owners

    busy = busy_thread_owners()
    for owner in busy:  # stop them so that one leak does not cascade into the next tests
        owner.shutdown()
    assert not busy, f"threads left running: {busy}"


@pytest.fixture
def artifacts() -> Path:
    """Where screenshots go (git ignored); look at them."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
