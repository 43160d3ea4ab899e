"""Write a tiny random-weight Qwen3.5 checkpoint in the published layout, for tests and benchmarks.

Same files and tensor names as the hub's ``Qwen3_5ForConditionalGeneration`` export (config with
``text_config`` and ``vision_config``, bfloat16 safetensors in two shards with an index, vision
tower, optional ``mtp.*`` block, a byte-level BPE tokenizer with the ChatML specials and a chat
template, generation config) at dimensions small enough to convert in a second.  The weights are
random: a converted model generates noise, but every code path of the converter runs.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sqale_desktop.core.models.convert.vocab import _QWEN35_REGEX

Spec = tuple[tuple[int, ...], str]  # shape, kind of random values
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
THINK_TOKENS = ("<think>", "</think>")
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)
_CORPUS = [
    "SELECT name, COUNT(*) FROM customers JOIN orders ON orders.customer_id = customers.id GROUP BY name;",
    '{"tool": "describe_table", "args": {"table_name": "invoice_items"}}',
    '{"tool": "run_query", "args": {"sql": "SELECT * FROM tracks LIMIT 5"}}',
    "The user wants the total revenue per country. I should look at the invoices table first.",
    "Tool result: Album, Artist, Customer, Employee, Genre, Invoice, InvoiceLine, MediaType, Playlist",
    "Größe, café, naïve, 東京, Ελληνικά, русский, emoji 🙂 and tabs\tand\nnewlines\r\n  spaces",
    "def main():\n    return 42  # numbers 1234567890 and 3.14159\n",
]


@dataclass(frozen=True)
class TinyDims:
    """Dimensions of the tiny model; value heads outnumber key heads to exercise the reorder."""

    hidden: int = 64
    layers: int = 4
    ffn: int = 128
    heads: int = 2
    kv_heads: int = 1
    head_dim: int = 32
    linear_k_heads: int = 2
    linear_v_heads: int = 4
    linear_head_dim: int = 16
    conv_kernel: int = 4
    bpe_vocab: int = 400
    vision_hidden: int = 32
    vocab_size: int | None = None
    """Model vocabulary (rows of the embedding); the ids past the tokenizer's are padding."""


def write_tiny_checkpoint(
    folder: Path,
    *,
    dims: TinyDims | None = None,
    with_mtp: bool = True,
    think_special: bool = True,
    seed: int = 0,
) -> Path:
    """Write the checkpoint into ``folder`` (created) and return it."""
    d = dims or TinyDims()
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    vocab_size = max(_write_tokenizer(folder, d.bpe_vocab, think_special), d.vocab_size or 0)
    config = _config(d, vocab_size)
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    specs = _specs(d, vocab_size, with_mtp)
    names = list(specs)
    half = len(names) // 2
    shards = {
        "model-00001-of-00002.safetensors": names[:half],
        "model-00002-of-00002.safetensors": names[half:],
    }
    weight_map: dict[str, str] = {}
    for file_name, shard_names in shards.items():
        _write_bf16({n: specs[n] for n in shard_names}, folder / file_name, rng)
        weight_map.update({n: file_name for n in shard_names})
    total = sum(2 * int(np.prod(shape)) for shape, _ in specs.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2), encoding="utf-8")
    return folder


def write_safetensors_bf16(path: Path, tensors: dict[str, npt.NDArray[np.float32]]) -> None:
    """Write float32 arrays as a bfloat16 safetensors file (numpy has no bfloat16 to do it)."""
    _write_header_and_data(path, {n: a.shape for n, a in tensors.items()}, lambda name: tensors[name])


def _write_bf16(specs: dict[str, Spec], path: Path, rng: np.random.Generator) -> None:
    def make(name: str) -> npt.NDArray[np.float32]:
        shape, kind = specs[name]
        return _random(kind, shape, rng)

    _write_header_and_data(path, {n: shape for n, (shape, _) in specs.items()}, make)


def _write_header_and_data(
    path: Path, shapes: dict[str, tuple[int, ...]], make: Callable[[str], npt.NDArray[np.float32]]
) -> None:
    # Tensors are made one at a time, so a checkpoint with 2B shapes needs one tensor of memory.
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in shapes.items():
        size = 2 * int(np.prod(shape, dtype=np.int64))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for name in shapes:
            bits = np.ascontiguousarray(make(name), dtype=np.float32).view(np.uint32)
            # round to nearest even, as torch's bfloat16 conversion does
            ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2").tofile(fh)


def _random(kind: str, shape: tuple[int, ...], rng: np.random.Generator) -> npt.NDArray[np.float32]:
    if kind == "weight":
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.05)
    if kind == "norm":
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.1)
    if kind == "gdn_norm":
        return 1 + rng.standard_normal(shape, dtype=np.float32) * np.float32(0.1)
    if kind == "a_log":
        return np.log(rng.uniform(1, 16, shape)).astype(np.float32)
    return np.ones(shape, dtype=np.float32)  # dt_bias


def _config(d: TinyDims, vocab_size: int) -> dict[str, Any]:
    layer_types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(d.layers)]
    return {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "tie_word_embeddings": True,
        "text_config": {
            "model_type": "qwen3_5_text",
            "attn_output_gate": True,
            "full_attention_interval": 4,
            "head_dim": d.head_dim,
            "hidden_act": "silu",
            "hidden_size": d.hidden,
            "intermediate_size": d.ffn,
            "layer_types": layer_types,
            "linear_conv_kernel_dim": d.conv_kernel,
            "linear_key_head_dim": d.linear_head_dim,
            "linear_num_key_heads": d.linear_k_heads,
            "linear_num_value_heads": d.linear_v_heads,
            "linear_value_head_dim": d.linear_head_dim,
            "max_position_embeddings": 4096,
            "mtp_num_hidden_layers": 1,
            "num_attention_heads": d.heads,
            "num_hidden_layers": d.layers,
            "num_key_value_heads": d.kv_heads,
            "rms_norm_eps": 1e-6,
            "vocab_size": vocab_size,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10_000_000,
                "partial_rotary_factor": 0.25,
                "mrope_interleaved": True,
                "mrope_section": _mrope_section(d.head_dim),
            },
        },
        "vision_config": {"hidden_size": d.vision_hidden, "depth": 1, "model_type": "qwen3_5"},
    }


def _mrope_section(head_dim: int) -> list[int]:
    pairs = head_dim // 4 // 2  # rotary dims / 2, split like [11, 11, 10] for 32
    first = (pairs + 2) // 3
    return [first, first, pairs - 2 * first]


def _specs(d: TinyDims, vocab: int, with_mtp: bool) -> dict[str, Spec]:
    """Every tensor's name, shape and kind of random values, in the published naming."""
    h = d.hidden
    key_dim = d.linear_k_heads * d.linear_head_dim
    value_dim = d.linear_v_heads * d.linear_head_dim
    out: dict[str, Spec] = {}
    lm = "model.language_model."
    out[f"{lm}embed_tokens.weight"] = ((vocab, h), "weight")

    def attention_block(prefix: str) -> None:
        out[f"{prefix}self_attn.q_proj.weight"] = ((2 * d.heads * d.head_dim, h), "weight")
        out[f"{prefix}self_attn.k_proj.weight"] = ((d.kv_heads * d.head_dim, h), "weight")
        out[f"{prefix}self_attn.v_proj.weight"] = ((d.kv_heads * d.head_dim, h), "weight")
        out[f"{prefix}self_attn.o_proj.weight"] = ((h, d.heads * d.head_dim), "weight")
        out[f"{prefix}self_attn.q_norm.weight"] = ((d.head_dim,), "norm")
        out[f"{prefix}self_attn.k_norm.weight"] = ((d.head_dim,), "norm")

    def common(prefix: str) -> None:
        out[f"{prefix}input_layernorm.weight"] = ((h,), "norm")
        out[f"{prefix}post_attention_layernorm.weight"] = ((h,), "norm")
        out[f"{prefix}mlp.gate_proj.weight"] = ((d.ffn, h), "weight")
        out[f"{prefix}mlp.up_proj.weight"] = ((d.ffn, h), "weight")
        out[f"{prefix}mlp.down_proj.weight"] = ((h, d.ffn), "weight")

    for i in range(d.layers):
        prefix = f"{lm}layers.{i}."
        common(prefix)
        if (i + 1) % 4 == 0:
            attention_block(prefix)
        else:
            la = f"{prefix}linear_attn."
            out[f"{la}in_proj_qkv.weight"] = ((2 * key_dim + value_dim, h), "weight")
            out[f"{la}in_proj_z.weight"] = ((value_dim, h), "weight")
            out[f"{la}in_proj_b.weight"] = ((d.linear_v_heads, h), "weight")
            out[f"{la}in_proj_a.weight"] = ((d.linear_v_heads, h), "weight")
            out[f"{la}conv1d.weight"] = ((2 * key_dim + value_dim, 1, d.conv_kernel), "weight")
            out[f"{la}dt_bias"] = ((d.linear_v_heads,), "dt_bias")
            out[f"{la}A_log"] = ((d.linear_v_heads,), "a_log")
            out[f"{la}norm.weight"] = ((d.linear_head_dim,), "gdn_norm")
            out[f"{la}out_proj.weight"] = ((h, value_dim), "weight")
    out[f"{lm}norm.weight"] = ((h,), "norm")
    v = d.vision_hidden
    out["model.visual.patch_embed.proj.weight"] = ((v, 3, 2, 16, 16), "weight")
    out["model.visual.blocks.0.attn.qkv.weight"] = ((3 * v, v), "weight")
    out["model.visual.blocks.0.norm1.weight"] = ((v,), "norm")
    out["model.visual.merger.linear_fc1.weight"] = ((4 * v, 4 * v), "weight")
    if with_mtp:
        out["mtp.fc.weight"] = ((h, 2 * h), "weight")
        out["mtp.pre_fc_norm_embedding.weight"] = ((h,), "norm")
        out["mtp.pre_fc_norm_hidden.weight"] = ((h,), "norm")
        out["mtp.norm.weight"] = ((h,), "norm")
        common("mtp.layers.0.")
        attention_block("mtp.layers.0.")
    return out


def _write_tokenizer(folder: Path, bpe_vocab: int, think_special: bool) -> int:
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_QWEN35_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False, trim_offsets=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=bpe_vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(_CORPUS * 4, trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    think = [AddedToken(t, special=think_special, normalized=False) for t in THINK_TOKENS]
    if think_special:
        tok.add_special_tokens(think)
    else:
        tok.add_tokens(think)
    tok.save(str(folder / "tokenizer.json"))
    n = tok.get_vocab_size()
    tokenizer_config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": 4096,
        "tokenizer_class": "Qwen2Tokenizer",
        "chat_template": CHAT_TEMPLATE,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2), encoding="utf-8")
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    generation = {
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"],
        "do_sample": True,
        "temperature": 0.6,
        "top_k": 20,
        "top_p": 0.95,
    }
    (folder / "generation_config.json").write_text(json.dumps(generation, indent=2), encoding="utf-8")
    return ((n + 8) // 64 + 1) * 64  # padded, like the real 248,320 > 248,077 used ids
