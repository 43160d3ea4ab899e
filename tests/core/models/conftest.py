"""Fixtures for model tests: a fake hub on 127.0.0.1 that huggingface_hub is pointed at.

huggingface_hub reads ``HF_ENDPOINT`` and ``HF_HUB_CACHE`` into ``huggingface_hub.constants``
once, at import, and the library may already be imported by an earlier test.  So the fixture both
sets the environment variables (for subprocesses such as the CLI) and patches the constants with
``monkeypatch.setattr`` (for this process): ``ENDPOINT`` and the resolve-URL template derived from
it, ``HF_HUB_CACHE``, the token paths.  Our code reads ``constants.ENDPOINT`` and
``constants.HF_HUB_CACHE`` at call time and passes the endpoint explicitly to every library call,
so URL templates the library built at import are never used.  ``HF_HOME`` and the token path point
into the temporary folder so that no real login token is picked up.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.core.models.fakehub import FakeHub


@pytest.fixture
def hf_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hub cache and Hugging Face home under tmp_path; returns the hub cache."""
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
    from huggingface_hub import constants

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
