"""The converter's tensor plan and transforms, checked against llama.cpp's qwen35 conventions.

A tiny random-weight checkpoint in the published layout is converted to an unquantized GGUF and
read back with gguf's reader; expected values are computed here independently (index loops,
not the converter's own reshapes).
"""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest

from sqale_desktop.core.models.convert import UnsupportedCheckpoint
from sqale_desktop.core.models.convert.checkpoint import Checkpoint
from sqale_desktop.core.models.convert.hparams import read_hparams
from sqale_desktop.core.models.convert.layout import plan_tensors
from sqale_desktop.core.models.convert.tiny_checkpoint import (
    TinyDims,
    write_safetensors_bf16,
    write_tiny_checkpoint,
)
from sqale_desktop.core.models.convert.writer import write_gguf

DIMS = TinyDims()


@pytest.fixture(scope="module")
def ckpt_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny", dims=DIMS, with_mtp=True)


@pytest.fixture(scope="module")
def gguf_reader(ckpt_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> gguf.GGUFReader:
    ckpt = Checkpoint(ckpt_dir)
    hp = read_hparams(ckpt.config)
    out = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_gguf(ckpt, hp, plan_tensors(ckpt, hp), out, name="tiny")
    return gguf.GGUFReader(out)


def _add_shard(folder: Path, name: str, tensors: dict[str, np.ndarray]) -> None:
    """Write one more shard and list it in the index, as a real checkpoint would."""
    write_safetensors_bf16(folder / name, tensors)
    index_path = folder / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    index["weight_map"].update(dict.fromkeys(tensors, name))
    index_path.write_text(json.dumps(index))


def _expected_names(layers: int, with_mtp: bool) -> set[str]:
    names = {"token_embd.weight", "output_norm.weight"}
    for i in range(layers):
        common = ["attn_norm", "post_attention_norm", "ffn_gate", "ffn_up", "ffn_down"]
        if (i + 1) % 4 == 0:
            kind = ["attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm"]
        else:
            kind = ["attn_qkv", "attn_gate", "ssm_beta", "ssm_alpha", "ssm_conv1d", "ssm_norm", "ssm_out"]
        names |= {f"blk.{i}.{n}.weight" for n in common + kind}
        if (i + 1) % 4 != 0:
            names |= {f"blk.{i}.ssm_dt.bias", f"blk.{i}.ssm_a"}
    if with_mtp:
        m = layers
        names |= {f"blk.{m}.{n}.weight" for n in ["attn_norm", "post_attention_norm", "ffn_gate", "ffn_up"]}
        names |= {f"blk.{m}.{n}.weight" for n in ["ffn_down", "attn_q", "attn_k", "attn_v", "attn_output"]}
        names |= {f"blk.{m}.{n}.weight" for n in ["attn_q_norm", "attn_k_norm"]}
        names |= {f"blk.{m}.nextn.{n}.weight" for n in ["eh_proj", "enorm", "hnorm", "shared_head_norm"]}
    return names


def test_plan_maps_text_tensors_skips_vision_and_writes_complete_mtp(ckpt_dir: Path) -> None:
    ckpt = Checkpoint(ckpt_dir)
    plan = plan_tensors(ckpt, read_hparams(ckpt.config))
    assert {t.gguf_name for t in plan.tensors} == _expected_names(DIMS.layers, with_mtp=True)
    assert plan.mtp_written and plan.block_count == DIMS.layers + 1
    assert {n for n, why in plan.skipped.items() if why == "vision tower"} == {
        n for n in ckpt.names() if n.startswith("model.visual.")
    }


def test_mtp_in_config_without_weights_writes_no_extra_block(tmp_path: Path) -> None:
    folder = write_tiny_checkpoint(tmp_path / "nomtp", dims=DIMS, with_mtp=False)
    ckpt = Checkpoint(folder)
    hp = read_hparams(ckpt.config)
    assert hp.mtp_layers_in_config == 1
    plan = plan_tensors(ckpt, hp)
    assert not plan.mtp_written and plan.block_count == DIMS.layers
    assert {t.gguf_name for t in plan.tensors} == _expected_names(DIMS.layers, with_mtp=False)


def test_incomplete_mtp_block_is_left_out(tmp_path: Path) -> None:
    folder = write_tiny_checkpoint(tmp_path / "partial", dims=DIMS, with_mtp=False)
    _add_shard(folder, "mtp.safetensors", {"mtp.fc.weight": np.ones((DIMS.hidden, 2 * DIMS.hidden))})
    ckpt = Checkpoint(folder)
    plan = plan_tensors(ckpt, read_hparams(ckpt.config))
    assert not plan.mtp_written
    assert plan.skipped["mtp.fc.weight"] == "incomplete multi-token-prediction block"


def test_mtp_can_be_excluded(ckpt_dir: Path) -> None:
    ckpt = Checkpoint(ckpt_dir)
    plan = plan_tensors(ckpt, read_hparams(ckpt.config), include_mtp=False)
    assert not plan.mtp_written
    assert all(not t.gguf_name.startswith(f"blk.{DIMS.layers}.") for t in plan.tensors)


def _tensor(reader: gguf.GGUFReader, name: str) -> np.ndarray:
    for t in reader.tensors:
        if t.name == name:
            if t.tensor_type == gguf.GGMLQuantizationType.BF16:
                return (np.asarray(t.data).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
            return np.asarray(t.data, dtype=np.float32)
    raise KeyError(name)


def _source(ckpt_dir: Path, name: str) -> np.ndarray:
    return Checkpoint(ckpt_dir).read_float32(name)


def _tiled_rows(k_heads: int, v_per_k: int, head: int) -> list[int]:
    """Source row for each destination row: destination head j*k_heads+g <- source head g*v_per_k+j."""
    order = []
    for j in range(v_per_k):
        for g in range(k_heads):
            src_head = g * v_per_k + j
            order.extend(range(src_head * head, (src_head + 1) * head))
    return order


def test_values_follow_llama_cpp_transforms(ckpt_dir: Path, gguf_reader: gguf.GGUFReader) -> None:
    lm = "model.language_model.layers"
    v_per_k = DIMS.linear_v_heads // DIMS.linear_k_heads
    hd = DIMS.linear_head_dim
    key_dim = DIMS.linear_k_heads * hd

    # (1 + w) RMSNorms become plain weights; the gated DeltaNet norm stays as is.
    np.testing.assert_allclose(
        _tensor(gguf_reader, "blk.0.attn_norm.weight"),
        _source(ckpt_dir, f"{lm}.0.input_layernorm.weight") + 1,
    )
    np.testing.assert_allclose(
        _tensor(gguf_reader, "blk.3.attn_q_norm.weight"),
        _source(ckpt_dir, f"{lm}.3.self_attn.q_norm.weight") + 1,
    )
    np.testing.assert_allclose(
        _tensor(gguf_reader, "blk.0.ssm_norm.weight"), _source(ckpt_dir, f"{lm}.0.linear_attn.norm.weight")
    )
    np.testing.assert_allclose(
        _tensor(gguf_reader, f"blk.{DIMS.layers}.nextn.enorm.weight"),
        _source(ckpt_dir, "mtp.pre_fc_norm_embedding.weight") + 1,
    )
    heads = _tiled_rows(DIMS.linear_k_heads, v_per_k, 1)
    np.testing.assert_allclose(
        _tensor(gguf_reader, "blk.0.ssm_a"),
        -np.exp(_source(ckpt_dir, f"{lm}.0.linear_attn.A_log")[heads]),
        rtol=1e-6,
    )
    # Value rows of the fused projection and the conv channels move to tiled order; q/k stay.
    rows = list(range(2 * key_dim)) + [2 * key_dim + r for r in _tiled_rows(DIMS.linear_k_heads, v_per_k, hd)]
    qkv = _source(ckpt_dir, f"{lm}.1.linear_attn.in_proj_qkv.weight")
    np.testing.assert_array_equal(_tensor(gguf_reader, "blk.1.attn_qkv.weight").reshape(qkv.shape), qkv[rows])
    conv = _source(ckpt_dir, f"{lm}.1.linear_attn.conv1d.weight")[:, 0, :]
    np.testing.assert_array_equal(
        _tensor(gguf_reader, "blk.1.ssm_conv1d.weight").reshape(conv.shape), conv[rows]
    )
    out = _source(ckpt_dir, f"{lm}.2.linear_attn.out_proj.weight")
    cols = _tiled_rows(DIMS.linear_k_heads, v_per_k, hd)
    np.testing.assert_array_equal(
        _tensor(gguf_reader, "blk.2.ssm_out.weight").reshape(out.shape), out[:, cols]
    )
    beta = _source(ckpt_dir, f"{lm}.2.linear_attn.in_proj_b.weight")
    np.testing.assert_array_equal(
        _tensor(gguf_reader, "blk.2.ssm_beta.weight").reshape(beta.shape), beta[heads]
    )
    # Untransformed weights are copied bit for bit.
    emb = _source(ckpt_dir, "model.language_model.embed_tokens.weight")
    np.testing.assert_array_equal(_tensor(gguf_reader, "token_embd.weight").reshape(emb.shape), emb)


def test_metadata_is_what_the_qwen35_loader_reads(gguf_reader: gguf.GGUFReader) -> None:
    def value(key: str) -> object:
        field = gguf_reader.fields[key]
        return field.contents()

    assert value("general.architecture") == "qwen35"
    assert value("qwen35.block_count") == DIMS.layers + 1
    assert value("qwen35.nextn_predict_layers") == 1
    assert value("qwen35.ssm.group_count") == DIMS.linear_k_heads
    assert value("qwen35.ssm.time_step_rank") == DIMS.linear_v_heads
    assert value("qwen35.ssm.inner_size") == DIMS.linear_v_heads * DIMS.linear_head_dim
    assert value("qwen35.rope.dimension_count") == DIMS.head_dim // 4
    assert len(value("qwen35.rope.dimension_sections")) == 4  # type: ignore[arg-type]
    assert value("tokenizer.ggml.pre") == "qwen35"
    assert "<|im_start|>" in str(value("tokenizer.chat_template"))
    assert value("general.sampling.top_k") == 20


def test_refuses_other_architectures(tmp_path: Path) -> None:
    folder = write_tiny_checkpoint(tmp_path / "other", dims=DIMS, with_mtp=False)
    config = (
        (folder / "config.json").read_text().replace("Qwen3_5ForConditionalGeneration", "LlamaForCausalLM")
    )
    (folder / "config.json").write_text(config)
    ckpt = Checkpoint(folder)
    with pytest.raises(UnsupportedCheckpoint, match="LlamaForCausalLM"):
        read_hparams(ckpt.config)


def test_refuses_truncated_safetensors(tmp_path: Path) -> None:
    folder = write_tiny_checkpoint(tmp_path / "cut", dims=DIMS, with_mtp=False)
    shard = folder / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])
    with pytest.raises(UnsupportedCheckpoint, match="truncated"):
        Checkpoint(folder)


def test_refuses_unknown_text_tensor(tmp_path: Path) -> None:
    folder = write_tiny_checkpoint(tmp_path / "extra", dims=DIMS, with_mtp=False)
    _add_shard(folder, "x.safetensors", {"model.language_model.layers.0.mystery.weight": np.ones(4)})
    ckpt = Checkpoint(folder)
    with pytest.raises(UnsupportedCheckpoint, match="mystery"):
        plan_tensors(ckpt, read_hparams(ckpt.config))


def test_streaming_in_small_row_blocks_writes_the_same_file(
    ckpt_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqale_desktop.core.models.convert import layout

    ckpt = Checkpoint(ckpt_dir)
    hp = read_hparams(ckpt.config)
    write_gguf(ckpt, hp, plan_tensors(ckpt, hp), tmp_path / "whole.gguf", name="tiny")
    monkeypatch.setattr(layout, "CHUNK_BYTES", 1000)  # the embedding goes out in many blocks
    write_gguf(ckpt, hp, plan_tensors(ckpt, hp), tmp_path / "blocks.gguf", name="tiny")
    assert (tmp_path / "blocks.gguf").read_bytes() == (tmp_path / "whole.gguf").read_bytes()


def test_only_shards_listed_in_the_index_are_read(tmp_path: Path) -> None:
    folder = write_tiny_checkpoint(tmp_path / "stray", dims=DIMS, with_mtp=False)
    write_safetensors_bf16(folder / "leftover.safetensors", {"something.else": np.ones(4)})
    assert "something.else" not in Checkpoint(folder).names()
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(UnsupportedCheckpoint, match="model-00002-of-00002"):
        Checkpoint(folder)
