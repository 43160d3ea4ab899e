"""The converted model's logits against transformers' forward pass.

Needs torch and transformers (with Qwen3.5 support), the ``reference`` extra that ``make test``
installs: a hard dependency of the suite, imported plainly, so a missing one fails.  It is the
semantic check of the conversion: with value heads outnumbering key heads, every transform (``1 + w`` norms,
``-exp(A_log)``, conv kernel, value-head reorder, gated query, partial interleaved RoPE) has to be
right for llama.cpp to compute what transformers computes on the same random checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from sqale_desktop.core.models.convert import ConvertOptions, convert_model
from sqale_desktop.core.models.convert.tiny_checkpoint import TinyDims, write_tiny_checkpoint

if not hasattr(transformers, "Qwen3_5ForCausalLM"):
    pytest.fail("this transformers has no Qwen3.5: the reference extra needs transformers>=5.24")

DIMS = TinyDims(hidden=256, ffn=512)
TOKENS = [5, 17, 300, 42, 99, 250, 7, 8, 120, 3, 400, 401, 402, 11, 60, 61]


def _reference_logits(folder: Path) -> np.ndarray:
    from safetensors import safe_open

    config = json.loads((folder / "config.json").read_text())
    text_config = transformers.Qwen3_5TextConfig(**config["text_config"])
    text_config.tie_word_embeddings = True
    model = transformers.Qwen3_5ForCausalLM(text_config).eval()
    state = {}
    for file in folder.glob("*.safetensors"):
        with safe_open(file, framework="pt") as fh:
            for key in fh.keys():  # noqa: SIM118 (safe_open is not a mapping)
                if key.startswith("model.language_model."):
                    state["model." + key.removeprefix("model.language_model.")] = fh.get_tensor(key).float()
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert set(missing) <= {"lm_head.weight"} and not unexpected
    model.tie_weights()
    with torch.no_grad():
        logits: np.ndarray = model(torch.tensor([TOKENS])).logits[0].numpy()
    return logits


def _llama_logits(path: Path) -> np.ndarray:
    import llama_cpp

    llm = llama_cpp.Llama(str(path), n_ctx=64, logits_all=True, n_threads=2, verbose=False)
    llm.eval(TOKENS)
    return np.array(llm.scores[: len(TOKENS)])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny", dims=DIMS, with_mtp=True)


@pytest.mark.slow
@pytest.mark.parametrize("quant", ["F16", "Q8_0"])
def test_llama_cpp_logits_match_transformers(checkpoint: Path, tmp_path: Path, quant: str) -> None:
    reference = _reference_logits(checkpoint)
    options = ConvertOptions(
        quant=quant, register=False, output_dir=tmp_path / "out", work_dir=tmp_path / "work", threads=2
    )
    got = _llama_logits(convert_model(checkpoint, options).path)
    diff = np.abs(got - reference)
    correlation = np.corrcoef(got.ravel(), reference.ravel())[0, 1]
    if quant == "F16":  # F16 weights, F32 compute: only rounding differences
        assert diff.max() < 0.05 * reference.std(), diff.max()
        assert (got.argmax(1) == reference.argmax(1)).all()
    else:  # 8-bit weights and activations through every layer
        assert correlation > 0.99, correlation
        assert diff.mean() < 0.15 * reference.std(), diff.mean()
        assert (got.argmax(1) == reference.argmax(1)).mean() >= 0.75
