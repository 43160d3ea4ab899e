"""The GGUFs the engine tests load: one tiny random-weight qwen35 per test run, and SmolLM2."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqale_desktop.core.engines.synthetic_gguf import TINY_SHAPE, write_qwen35_gguf
from tests.conftest import smollm2_gguf


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny qwen35 GGUF (the real architecture's hybrid memory), written once for the whole run."""
    return write_qwen35_gguf(tmp_path_factory.mktemp("gguf") / "tiny-qwen35.gguf", TINY_SHAPE, seed=3)


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct: a real, trained attention-only model."""
    return smollm2_gguf()
