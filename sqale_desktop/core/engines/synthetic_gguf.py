"""Random-weight GGUF files of architecture ``qwen35`` for engine tests and benchmarks.

A real Qwen3.5 checkpoint cannot be fetched here (and is too big for tests), but llama.cpp's
speed, memory and cache behaviour depend only on the architecture and the tensor shapes, not on
the weights.  So tests write a *tiny* ``qwen35`` file (a few hundred kB, the real
every-4th-block-full-attention layout) and the benchmark writes one with Qwen3.5-2B's shapes,
quantized to Q4_K_M like the shipped model.  Output quality is meaningless by construction.

The vocabulary is GPT-2 byte level (every byte has a token, so any text tokenizes) plus the
ChatML/thinking specials as control tokens, so prompts look like the agent's real prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sqale_desktop.core.engines.qwen35_layout import (
    QWEN35_2B,
    Qwen35Shape,
    TensorSpec,
    apply_metadata,
    tensor_specs,
)

SPECIAL_TOKENS: tuple[str, ...] = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")

# The generation prompt opens thinking, as Qwen3.5's own template does with thinking enabled.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"
)

# A few merges so ordinary words become fewer tokens than bytes, as with a real BPE vocabulary.
_MERGES: tuple[tuple[str, str], ...] = (
    ("Ġ", "t"),
    ("h", "e"),
    ("Ġt", "he"),
    ("i", "n"),
    ("e", "r"),
    ("Ġ", "a"),
    ("o", "n"),
    ("r", "e"),
    ("Ġ", "s"),
    ("e", "s"),
    ("a", "t"),
    ("Ġ", "c"),
    ("o", "r"),
    ("e", "n"),
    ("Ġ", "w"),
    ("Ġ", "f"),
)

TINY_SHAPE = Qwen35Shape(
    vocab_size=320,
    hidden_size=64,
    num_hidden_layers=4,
    intermediate_size=128,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=64,
    linear_num_key_heads=2,
    linear_num_value_heads=2,
    linear_key_head_dim=32,
    linear_value_head_dim=32,
    mrope_section=(3, 3, 2, 0),
    max_position_embeddings=32_768,
)

# Small enough for the benchmark's --quick mode, big enough (rows of 256) to quantize to Q4_K_M.
SMALL_SHAPE = replace(
    QWEN35_2B,
    vocab_size=32_768,
    hidden_size=512,
    intermediate_size=1536,
    num_hidden_layers=8,
    num_attention_heads=4,
    num_key_value_heads=1,
    linear_num_key_heads=4,
    linear_num_value_heads=4,
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (what byte-level BPE vocabularies store)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars), strict=True))


def vocabulary(size: int) -> tuple[list[str], list[int], list[str]]:
    """Tokens, token types and merges of a byte-level vocabulary of exactly ``size`` entries.

    Layout: 256 byte tokens, one token per merge, filler tokens (never produced by the
    tokenizer, but sampleable, so random generation yields varied text), then the specials last
    (as in Qwen's vocabulary, where they sit above the ordinary tokens).
    """
    import gguf

    normal, control = int(gguf.TokenType.NORMAL), int(gguf.TokenType.CONTROL)
    byte_chars = bytes_to_unicode()
    tokens = [byte_chars[b] for b in range(256)]
    tokens += ["".join(pair) for pair in _MERGES]
    n_filler = size - len(tokens) - len(SPECIAL_TOKENS)
    if n_filler < 0:
        raise ValueError(
            f"vocabulary of {size} tokens is too small (needs {len(tokens) + len(SPECIAL_TOKENS)})"
        )
    tokens += [f"Ġw{i}" for i in range(n_filler)]
    types = [normal] * len(tokens)
    tokens += list(SPECIAL_TOKENS)
    types += [control] * len(SPECIAL_TOKENS)
    return tokens, types, [f"{a} {b}" for a, b in _MERGES]


def _tensor_data(
    spec: TensorSpec, rng: np.random.Generator, pool: npt.NDArray[np.float16]
) -> npt.NDArray[Any]:
    """Values that keep a random network numerically tame (no NaN/inf through 24 blocks)."""
    if spec.kind == "matrix":
        start = int(rng.integers(0, pool.size))
        return np.resize(np.roll(pool, -start), spec.shape)
    if spec.kind in ("norm", "ssm_norm"):
        return np.ones(spec.shape, dtype=np.float32)
    if spec.kind == "ssm_a":
        return -rng.uniform(0.5, 4.0, size=spec.shape).astype(np.float32)
    if spec.kind == "bias":
        return rng.uniform(-1.0, 1.0, size=spec.shape).astype(np.float32)
    return (rng.standard_normal(spec.shape) * 0.2).astype(np.float32)


def _write_tokenizer(writer: Any, shape: Qwen35Shape) -> None:
    tokens, types, merges = vocabulary(shape.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen35")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_pad_token_id(tokens.index("<|endoftext|>"))
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)


def write_qwen35_gguf(
    path: Path,
    shape: Qwen35Shape = TINY_SHAPE,
    *,
    seed: int = 0,
    tokenizer: Callable[[Any, Qwen35Shape], None] | None = None,
) -> Path:
    """Write a random-weight ``qwen35`` GGUF (projections in F16, norms and SSM parameters in F32).

    Tensors are streamed to the file one at a time, so the 2B shape (3.8 GB in F16) never sits
    in memory whole.  ``tokenizer(writer, shape)`` writes another vocabulary than this module's
    (``benchmarks/bpe_vocab.py``: a real BPE one, for realistic token counts).
    """
    import gguf

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    # Projections are drawn from one shared pool of normals (rolled per tensor): drawing ~2 billion
    # fresh values would cost a minute and the weights' values carry no meaning here.
    pool = (rng.standard_normal(1 << 20) * 0.02).astype(np.float16)
    specs = tensor_specs(shape)
    writer = gguf.GGUFWriter(str(path), "qwen35")
    writer.add_name(f"synthetic-qwen35-h{shape.hidden_size}-l{shape.num_hidden_layers}")
    writer.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16))
    apply_metadata(writer, shape)
    (tokenizer or _write_tokenizer)(writer, shape)
    for spec in specs:
        dtype = np.dtype(np.float16) if spec.kind == "matrix" else np.dtype(np.float32)
        nbytes = int(np.prod(spec.shape)) * dtype.itemsize
        writer.add_tensor_info(spec.name, spec.shape, dtype, nbytes)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for data in _iter_data(specs, rng, pool):
        writer.write_tensor_data(data)
    writer.close()
    return path


def _iter_data(
    specs: list[TensorSpec], rng: np.random.Generator, pool: npt.NDArray[np.float16]
) -> Iterator[npt.NDArray[Any]]:
    for spec in specs:
        yield _tensor_data(spec, rng, pool)


def quantize(source: Path, target: Path, *, ftype: str = "Q4_K_M", threads: int | None = None) -> Path:
    """Quantize a GGUF with llama.cpp's own quantizer (``llama_model_quantize``), as the shipped model was."""
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
    params.nthread = threads or 0
    target.parent.mkdir(parents=True, exist_ok=True)
    status = llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params))
    if status != 0:
        raise RuntimeError(f"llama_model_quantize failed ({status}) for {source}")
    return target
