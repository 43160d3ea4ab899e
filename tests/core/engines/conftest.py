"""The GGUFs the engine tests load: one tiny random-weight qwen35 per test run, and SmolLM2."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sqale_desktop.core.engines.synthetic_gguf import TINY_SHAPE, write_qwen35_gguf
from tests.core.engines.sse_server import Stream, serving
from tests.helpers import smollm2_gguf


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny qwen35 GGUF (the real architecture's hybrid memory), written once for the whole run."""
    return write_qwen35_gguf(tmp_path_factory.mktemp("gguf") / "tiny-qwen35.gguf", TINY_SHAPE, seed=3)


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct: a real, trained attention-only model."""
    return smollm2_gguf()


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Stream], str]]:
    """Starts a server for a ``Stream``; returns its base URL.  Stopped (and unstalled) at teardown.

    For TLS the client trusts the test CA through ``SSL_CERT_FILE``, as a user with a company CA would.
    """
    with serving(tmp_path, monkeypatch.setenv) as start:
        yield start
