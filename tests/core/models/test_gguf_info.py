"""GGUF metadata decides whether a model is a SQaLe agent and how much context it was trained for."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqale_desktop.core.engines.synthetic_gguf import TINY_SHAPE, write_qwen35_gguf
from sqale_desktop.core.models.gguf_info import (
    GgufUnreadable,
    context_warning,
    effective_n_ctx,
    fitness,
    fitness_warning,
    read_gguf_info,
)
from tests.helpers import smollm2_gguf as smollm2


def test_smollm2_is_not_an_agent_and_says_why() -> None:
    info = read_gguf_info(smollm2())
    assert info.architecture == "llama"
    assert info.context_length == 8192
    assert not info.chat_template_has_think
    assert fitness(info) == "foreign"
    warning = fitness_warning(info)
    assert warning is not None
    assert "not one of the SQaLe agents" in warning and "architecture llama" in warning
    assert "will most likely answer nothing" in warning


def test_a_qwen35_with_a_thinking_template_is_the_right_family(tmp_path: Path) -> None:
    path = write_qwen35_gguf(tmp_path / "tiny.gguf", TINY_SHAPE)
    info = read_gguf_info(path)
    assert info.architecture == "qwen35" and info.chat_template_has_think
    assert info.context_length == TINY_SHAPE.max_position_embeddings
    # Not a known checkpoint by name: a softer note; built from a catalog checkpoint: no warning.
    assert fitness(info) == "qwen35"
    assert "Qwen3.5" in (fitness_warning(info) or "")
    assert fitness(info, "trl-lab/qwen3.5-2b-grpo-sqale") == "sqale"
    assert fitness_warning(info, "trl-lab/qwen3.5-2b-grpo-sqale") is None


def test_context_above_the_training_context_is_clamped_and_said() -> None:
    info = read_gguf_info(smollm2())
    assert effective_n_ctx(info, 16384) == 8192
    assert effective_n_ctx(info, 4096) == 4096
    assert effective_n_ctx(None, 16384) == 16384
    warning = context_warning(info, 16384)
    assert warning is not None and "16,384" in warning and "8,192" in warning
    assert context_warning(info, 8192) is None


def test_a_file_that_is_not_gguf_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises(GgufUnreadable, match="could not be read as a GGUF"):
        read_gguf_info(bad)


def test_the_header_scan_agrees_with_the_gguf_package(tmp_path: Path) -> None:
    """The fast scan reads what the gguf package's own (slow) reader reads."""
    import gguf

    for path in (smollm2(), write_qwen35_gguf(tmp_path / "tiny.gguf", TINY_SHAPE)):
        info = read_gguf_info(path)
        reader = gguf.GGUFReader(path)
        arch = reader.fields["general.architecture"].contents()
        assert info.architecture == arch
        assert info.name == reader.fields["general.name"].contents()
        assert info.context_length == reader.fields[f"{arch}.context_length"].contents()
        assert info.block_count == reader.fields[f"{arch}.block_count"].contents()
        assert info.tokenizer_pre == reader.fields["tokenizer.ggml.pre"].contents()
        template = reader.fields["tokenizer.chat_template"].contents()
        assert info.chat_template_has_think == ("<think>" in template)
