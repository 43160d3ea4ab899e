"""The qwen35 GGUF layout, the random-weight writer, and the engine's small pure helpers."""

from __future__ import annotations

from pathlib import Path

import gguf
import llama_cpp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.engines.llama.cpu_info import _linux_physical_cores, physical_cores
from sqale_desktop.core.engines.llama.llama_sampler import sampler_order
from sqale_desktop.core.engines.llama.loading import gpu_layer_attempts
from sqale_desktop.core.engines.llama.offload import read_footprint
from sqale_desktop.core.engines.qwen35_layout import (
    QWEN35_2B,
    Qwen35Shape,
    metadata,
    tensor_specs,
)
from sqale_desktop.core.engines.synthetic_gguf import (
    CHAT_TEMPLATE,
    SPECIAL_TOKENS,
    TINY_SHAPE,
)

# Qwen3.5-2B's public config.json (text part nested as in the multimodal checkpoint).
QWEN35_2B_CONFIG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "tie_word_embeddings": True,
    "text_config": {
        "vocab_size": 248320,
        "hidden_size": 2048,
        "num_hidden_layers": 24,
        "intermediate_size": 6144,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 16,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "full_attention_interval": 4,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 262144,
        "rope_parameters": {
            "rope_theta": 10000000,
            "partial_rotary_factor": 0.25,
            "mrope_section": [11, 11, 10],
        },
        "mtp_num_hidden_layers": 1,
    },
}


@pytest.fixture(scope="module")
def tiny_llama(tiny_path: Path) -> llama_cpp.Llama:
    return llama_cpp.Llama(str(tiny_path), n_ctx=256, n_threads=1, verbose=False)


def test_hf_config_gives_the_2b_shape() -> None:
    assert Qwen35Shape.from_hf_config(QWEN35_2B_CONFIG) == QWEN35_2B
    assert QWEN35_2B.rope_dimension_count == 64
    assert [i for i in range(24) if QWEN35_2B.is_full_attention(i)] == [3, 7, 11, 15, 19, 23]


def test_2b_tensor_list_has_about_1_88_billion_parameters() -> None:
    specs = tensor_specs(QWEN35_2B)
    total = sum(int(np.prod(s.shape)) for s in specs)
    assert 1.85e9 < total < 1.91e9
    assert "output.weight" not in {s.name for s in specs}  # tied embeddings
    assert not any(s.name.startswith("blk.24.") for s in specs)  # no MTP block


def test_tiny_file_has_the_layout_the_loader_expects(tiny_path: Path) -> None:
    reader = gguf.GGUFReader(tiny_path)
    fields = {name: field.contents() for name, field in reader.fields.items()}
    assert fields["general.architecture"] == "qwen35"
    for key, value in metadata(TINY_SHAPE).items():
        assert fields[key] == pytest.approx(value), key
    names = [t.name for t in reader.tensors]
    assert names == [s.name for s in tensor_specs(TINY_SHAPE)]
    shapes = {t.name: tuple(int(d) for d in reversed(t.shape)) for t in reader.tensors}
    assert all(shapes[s.name] == s.shape for s in tensor_specs(TINY_SHAPE))
    assert fields["tokenizer.chat_template"] == CHAT_TEMPLATE


def test_tiny_file_loads_with_four_blocks_and_single_token_specials(tiny_llama: llama_cpp.Llama) -> None:
    assert llama_cpp.llama_model_n_layer(tiny_llama.model) == 4
    vocab = llama_cpp.llama_model_get_vocab(tiny_llama.model)
    for special in SPECIAL_TOKENS:
        ids = tiny_llama.tokenize(special.encode(), add_bos=False, special=True)
        assert len(ids) == 1, special
    im_end = tiny_llama.tokenize(b"<|im_end|>", add_bos=False, special=True)[0]
    eot = tiny_llama.tokenize(b"<|endoftext|>", add_bos=False, special=True)[0]
    assert llama_cpp.llama_vocab_is_eog(vocab, im_end)
    assert llama_cpp.llama_vocab_is_eog(vocab, eot)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_any_text_round_trips_through_the_tiny_vocabulary(tiny_llama: llama_cpp.Llama, text: str) -> None:
    ids = tiny_llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    assert tiny_llama.detokenize(ids).decode("utf-8") == text


def test_block_count_is_read_from_the_header(tiny_path: Path, tmp_path: Path) -> None:
    footprint = read_footprint(tiny_path)
    assert footprint is not None and footprint.n_layers == 4
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file")
    assert read_footprint(junk) is None


def test_gpu_layer_attempts_end_on_the_cpu() -> None:
    assert gpu_layer_attempts("auto", False, 24) == [0]
    assert gpu_layer_attempts("all", False, 24) == [0]
    assert gpu_layer_attempts("auto", True, 24) == [-1, 12, 6, 3, 1, 0]
    assert gpu_layer_attempts(10, True, 24) == [10, 5, 2, 1, 0]
    assert gpu_layer_attempts(0, True, 24) == [0]
    assert gpu_layer_attempts("none", True, 24, fit=25) == [0]  # the settings' "none", as stored


def test_sampler_chain_applies_temperature_before_top_p() -> None:
    stages = sampler_order(SamplingParams(temperature=0.6, top_p=0.95, top_k=20, min_p=0.0, seed=7))
    names = [name for name, _ in stages]
    # vLLM: temperature, then top-k, then top-p.  Top-k commutes with a positive temperature;
    # temperature before top-p is what changes the nucleus (llama.cpp's default gets it wrong).
    assert names.index("temp") < names.index("top_p") < names.index("dist")
    assert names.index("top_k") < names.index("top_p")
    assert dict(stages)["temp"] == (0.6,)
    assert dict(stages)["top_k"] == (20,)
    assert dict(stages)["top_p"] == (0.95, 1)
    assert dict(stages)["min_p"] == (0.0, 1)
    assert dict(stages)["penalties"][1] == 1.0
    assert dict(stages)["dist"] == (7,)
    assert dict(sampler_order(SamplingParams(top_k=-1)))["top_k"] == (0,)  # vLLM's "off"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-3000, 3000), min_size=2, max_size=64, unique=True),
    st.floats(0.05, 4.0),
    st.integers(1, 64),
)
def test_top_k_keeps_the_same_tokens_before_or_after_temperature(
    logits: list[int], temperature: float, k: int
) -> None:
    """Why the chain may cut top-k before dividing by the temperature and still match vLLM."""
    raw = np.array(logits) / 100.0  # distinct logits, 0.01 apart
    assert set(np.argsort(-raw)[:k]) == set(np.argsort(-(raw / temperature))[:k])


def test_physical_cores_count_cores_not_hyperthreads() -> None:
    # Two cores with two hyperthreads each: logical CPUs 0-3.
    blocks = [f"processor\t: {cpu}\nphysical id\t: 0\ncore id\t\t: {cpu % 2}\n" for cpu in range(4)]
    cpuinfo = "\n".join(blocks)
    assert _linux_physical_cores(cpuinfo, {0, 1, 2, 3}) == 2
    assert _linux_physical_cores(cpuinfo, {0}) == 1
    assert physical_cores() >= 1
