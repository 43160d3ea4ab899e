"""Shared fixtures: the real databases in ../shared/data and an isolated app home for every test."""

from __future__ import annotations

import os
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


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every app folder (settings, history, registry) at a fresh temporary directory."""
    home = tmp_path_factory.mktemp("sqale-home")
    monkeypatch.setenv("SQALE_DESKTOP_HOME", str(home))
    return home


@pytest.fixture
def chinook() -> Path:
    return shared_data("sample/chinook.sqlite")


@pytest.fixture
def northwind() -> Path:
    return shared_data("sample/northwind.sqlite")


@pytest.fixture
def sakila() -> Path:
    return shared_data("sample/sakila.sqlite")
