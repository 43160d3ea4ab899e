"""Shared fixtures: the real databases in ../shared/data, an isolated app home for every test, and the
fake Hugging Face hub (for the model, command and model-manager tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.completion_server import Script
    from tests.core.models.fakehub import FakeHub

from tests.helpers import shared_data


@pytest.fixture(autouse=True, scope="session")
def llama_backends() -> None:
    """Register llama.cpp's dynamic backends once, as the app does before its first model loads.

    Tests that build a ``llama_cpp.Llama`` themselves (to compare with the engine) need them; the
    engine module is imported first so its OpenMP wait policy is set before libgomp loads.
    """
    import sqale_desktop.core.engines.llama.engine  # noqa: F401  (thread policy, then llama_cpp)
    from sqale_desktop.core.engines.llama.backends import load_backends

    load_backends()


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


@pytest.fixture
def hf_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hub cache and Hugging Face home under tmp_path; returns the hub cache.

    For the model tests, the command tests and the model manager's: a fake hub on 127.0.0.1
    (``fake_hub``) that huggingface_hub is pointed at.

    huggingface_hub reads ``HF_ENDPOINT`` and ``HF_HUB_CACHE`` into ``huggingface_hub.constants``
    once, at import, and the library may already be imported by an earlier test.  So the fixture both
    sets the environment variables (for subprocesses such as the CLI) and patches the constants with
    ``monkeypatch.setattr`` (for this process): ``ENDPOINT`` and the resolve-URL template derived from
    it, ``HF_HUB_CACHE``, the token paths.  Our code reads ``constants.ENDPOINT`` and
    ``constants.HF_HUB_CACHE`` at call time and passes the endpoint explicitly to every library call,
    so URL templates the library built at import are never used.  ``HF_HOME`` and the token path point
    into the temporary folder so that no real login token is picked up.
    """
    from huggingface_hub import constants

    hf_home = tmp_path / "hf-home"
    cache = hf_home / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HOME", str(hf_home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(hf_home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(hf_home / "stored_tokens"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return cache


@pytest.fixture
def fake_hub(hf_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """The fake hub, started, with huggingface_hub pointed at it (see ``hf_env``)."""
    from huggingface_hub import constants

    from tests.core.models.fakehub import FakeHub

    hub = FakeHub().start()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    # built from ENDPOINT at import; hf_hub_url only swaps in an explicit endpoint when the
    # template starts with the current ENDPOINT, so it must follow the patch
    template = hub.url + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    try:
        yield hub
    finally:
        hub.stop()


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    """An OpenAI-compatible completion server on 127.0.0.1 (tests/completion_server.py)."""
    from tests.completion_server import running_server

    with running_server() as running:
        yield running
