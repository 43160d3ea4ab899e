"""What llama.cpp's ``qwen35`` loader expects of a GGUF: metadata keys, tensor names and shapes.

Worked out from the llama.cpp vendored in llama-cpp-python 0.3.36 (``src/models/qwen35.cpp``,
``src/llama-arch.cpp``) and its converter (``conversion/qwen.py``: ``Qwen3_5TextModel``).  It serves
the random-weight test/benchmark model (``synthetic_gguf``); the on-device converter of real
checkpoints (``core.models.convert``) maps checkpoint names and value transforms itself (its
``layout`` module, checked against transformers' logits) and writes the same keys.

Shapes here are NumPy shapes (rows, columns), i.e. llama.cpp's ``{ne0, ne1}`` reversed: a
projection from ``n_in`` to ``n_out`` features is stored as an ``(n_out, n_in)`` array, exactly
as in a Hugging Face checkpoint.

The loader's facts that matter when writing a file:

* Block ``i`` is full (gated) attention when ``(i + 1) % full_attention_interval == 0`` and Gated
  DeltaNet linear attention otherwise (``{arch}.attention.recurrent_layers`` may override).
* Full attention's ``attn_q`` projects to ``2 * n_head * head_dim``: query and output gate
  interleaved per head, as the checkpoint stores ``q_proj``.
* Linear attention's ``attn_qkv`` rows are ``[q (k_heads*k_dim), k (k_heads*k_dim), v
  (v_heads*v_dim)]``; ``ssm_conv1d`` is ``(conv_dim, kernel)``; ``ssm_a`` holds ``-exp(A_log)``
  (no ``.weight`` suffix); ``ssm_dt`` is a ``.bias``.
* RMSNorm weights other than the DeltaNet output norm are stored as ``1 + w`` (Qwen3-Next's
  zero-centred norm convention, the converter adds 1).
* With tied embeddings no ``output.weight`` is written; llama.cpp reuses ``token_embd``.
* ``{arch}.rope.dimension_sections`` is required (interleaved M-RoPE, default ``[11, 11, 10, 0]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ARCH = "qwen35"

DEFAULT_MROPE_SECTIONS: tuple[int, int, int, int] = (11, 11, 10, 0)


@dataclass(frozen=True)
class Qwen35Shape:
    """The text model's hyper-parameters, named as in the checkpoint's ``config.json``."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int = 4
    full_attention_interval: int = 4
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10_000_000.0
    partial_rotary_factor: float = 0.25
    mrope_section: tuple[int, ...] = DEFAULT_MROPE_SECTIONS
    max_position_embeddings: int = 262_144
    tie_word_embeddings: bool = True

    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any]) -> Qwen35Shape:
        """Read a Qwen3.5 ``config.json`` (the multimodal one nests the text part in ``text_config``)."""
        text: dict[str, Any] = {**config, **config.get("text_config", {})}
        rope: dict[str, Any] = dict(text.get("rope_parameters") or text.get("rope_scaling") or {})
        section = rope.get("mrope_section")
        mrope = tuple(int(v) for v in section) if section else DEFAULT_MROPE_SECTIONS
        mrope = ((*mrope, 0, 0, 0, 0))[:4]
        hidden = int(text["hidden_size"])
        heads = int(text["num_attention_heads"])
        return cls(
            vocab_size=int(text["vocab_size"]),
            hidden_size=hidden,
            num_hidden_layers=int(text["num_hidden_layers"]),
            intermediate_size=int(text["intermediate_size"]),
            num_attention_heads=heads,
            num_key_value_heads=int(text["num_key_value_heads"]),
            head_dim=int(text.get("head_dim") or hidden // heads),
            linear_num_key_heads=int(text["linear_num_key_heads"]),
            linear_num_value_heads=int(text["linear_num_value_heads"]),
            linear_key_head_dim=int(text["linear_key_head_dim"]),
            linear_value_head_dim=int(text["linear_value_head_dim"]),
            linear_conv_kernel_dim=int(text.get("linear_conv_kernel_dim", 4)),
            full_attention_interval=int(text.get("full_attention_interval", 4)),
            rms_norm_eps=float(text.get("rms_norm_eps", 1e-6)),
            rope_theta=float(rope.get("rope_theta", text.get("rope_theta", 10_000_000.0))),
            partial_rotary_factor=float(
                rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 0.25))
            ),
            mrope_section=mrope,
            max_position_embeddings=int(text.get("max_position_embeddings", 262_144)),
            tie_word_embeddings=bool(
                config.get("tie_word_embeddings", text.get("tie_word_embeddings", True))
            ),
        )

    def is_full_attention(self, block: int) -> bool:
        """Whether block ``block`` is a full-attention block (the rest are linear attention)."""
        return (block + 1) % self.full_attention_interval == 0

    @property
    def rope_dimension_count(self) -> int:
        return round(self.head_dim * self.partial_rotary_factor)

    @property
    def linear_key_dim(self) -> int:
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def linear_value_dim(self) -> int:
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.linear_key_dim + self.linear_value_dim


# Qwen3.5-2B's text part (its public config.json); the 0.8B and larger sizes differ only in numbers.
QWEN35_2B = Qwen35Shape(
    vocab_size=248_320,
    hidden_size=2048,
    num_hidden_layers=24,
    intermediate_size=6144,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=256,
    linear_num_key_heads=16,
    linear_num_value_heads=16,
    linear_key_head_dim=128,
    linear_value_head_dim=128,
)


def metadata(shape: Qwen35Shape) -> dict[str, Any]:
    """The architecture's GGUF key/value pairs (tokenizer keys excluded), keyed by their full names,
    in the order they are written: integers (written as uint32), floats (float32) and the rope
    sections (an array), the types llama.cpp reads these keys as (:func:`apply_metadata`)."""
    a = ARCH
    return {
        f"{a}.block_count": shape.num_hidden_layers,
        f"{a}.context_length": shape.max_position_embeddings,
        f"{a}.embedding_length": shape.hidden_size,
        f"{a}.feed_forward_length": shape.intermediate_size,
        f"{a}.attention.head_count": shape.num_attention_heads,
        f"{a}.attention.head_count_kv": shape.num_key_value_heads,
        f"{a}.attention.key_length": shape.head_dim,
        f"{a}.attention.value_length": shape.head_dim,
        f"{a}.attention.layer_norm_rms_epsilon": float(shape.rms_norm_eps),
        f"{a}.rope.freq_base": float(shape.rope_theta),
        f"{a}.rope.dimension_count": shape.rope_dimension_count,
        f"{a}.rope.dimension_sections": list(shape.mrope_section),
        f"{a}.ssm.conv_kernel": shape.linear_conv_kernel_dim,
        f"{a}.ssm.state_size": shape.linear_key_head_dim,
        f"{a}.ssm.group_count": shape.linear_num_key_heads,
        f"{a}.ssm.time_step_rank": shape.linear_num_value_heads,
        f"{a}.ssm.inner_size": shape.linear_value_dim,
        f"{a}.full_attention_interval": shape.full_attention_interval,
    }


def apply_metadata(writer: Any, shape: Qwen35Shape, *, block_count: int | None = None) -> None:
    """Write the pairs :func:`metadata` lists through a ``gguf.GGUFWriter`` made with ``arch="qwen35"``,
    each with the GGUF type the writer's typed ``add_*`` helpers give that key: an integer as uint32,
    a float as float32, the sections as an array.  The pairs are listed once, there: calling the
    helpers one by one would list them a second time, to be kept in step by hand.

    ``block_count`` overrides the trunk's layer count when the file carries more blocks (the
    converter appends the multi-token-prediction block after the trunk).
    """
    pairs = metadata(shape)
    if block_count is not None:
        pairs[f"{ARCH}.block_count"] = block_count
    for key, value in pairs.items():
        if isinstance(value, list):
            writer.add_array(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        else:
            writer.add_uint32(key, value)


@dataclass(frozen=True)
class TensorSpec:
    """One tensor the loader reads: GGUF name, NumPy shape, and how it is initialised/kept.

    ``kind`` is ``"matrix"`` (a projection, quantizable), ``"norm"`` (RMSNorm weight stored as
    ``1 + w``), ``"ssm_norm"`` (the DeltaNet output norm, stored as is), ``"ssm_a"`` (negative
    decay rates), ``"bias"`` (the DeltaNet time-step bias) or ``"conv"`` (the short convolution).
    """

    name: str
    shape: tuple[int, ...]
    kind: str


def tensor_specs(shape: Qwen35Shape) -> list[TensorSpec]:
    """Every tensor of the text model in file order (embedding, blocks, output)."""
    s = shape
    n, hd = s.hidden_size, s.head_dim
    specs = [TensorSpec("token_embd.weight", (s.vocab_size, n), "matrix")]
    for i in range(s.num_hidden_layers):
        b = f"blk.{i}"
        specs.append(TensorSpec(f"{b}.attn_norm.weight", (n,), "norm"))
        if s.is_full_attention(i):
            specs += [
                TensorSpec(f"{b}.attn_q.weight", (2 * s.num_attention_heads * hd, n), "matrix"),
                TensorSpec(f"{b}.attn_k.weight", (s.num_key_value_heads * hd, n), "matrix"),
                TensorSpec(f"{b}.attn_v.weight", (s.num_key_value_heads * hd, n), "matrix"),
                TensorSpec(f"{b}.attn_output.weight", (n, s.num_attention_heads * hd), "matrix"),
                TensorSpec(f"{b}.attn_q_norm.weight", (hd,), "norm"),
                TensorSpec(f"{b}.attn_k_norm.weight", (hd,), "norm"),
            ]
        else:
            specs += [
                TensorSpec(f"{b}.attn_qkv.weight", (s.conv_dim, n), "matrix"),
                TensorSpec(f"{b}.attn_gate.weight", (s.linear_value_dim, n), "matrix"),
                TensorSpec(f"{b}.ssm_conv1d.weight", (s.conv_dim, s.linear_conv_kernel_dim), "conv"),
                TensorSpec(f"{b}.ssm_dt.bias", (s.linear_num_value_heads,), "bias"),
                TensorSpec(f"{b}.ssm_a", (s.linear_num_value_heads,), "ssm_a"),
                TensorSpec(f"{b}.ssm_beta.weight", (s.linear_num_value_heads, n), "matrix"),
                TensorSpec(f"{b}.ssm_alpha.weight", (s.linear_num_value_heads, n), "matrix"),
                TensorSpec(f"{b}.ssm_norm.weight", (s.linear_value_head_dim,), "ssm_norm"),
                TensorSpec(f"{b}.ssm_out.weight", (n, s.linear_value_dim), "matrix"),
            ]
        specs += [
            TensorSpec(f"{b}.post_attention_norm.weight", (n,), "norm"),
            TensorSpec(f"{b}.ffn_gate.weight", (s.intermediate_size, n), "matrix"),
            TensorSpec(f"{b}.ffn_up.weight", (s.intermediate_size, n), "matrix"),
            TensorSpec(f"{b}.ffn_down.weight", (n, s.intermediate_size), "matrix"),
        ]
    specs.append(TensorSpec("output_norm.weight", (n,), "norm"))
    if not s.tie_word_embeddings:
        specs.append(TensorSpec("output.weight", (s.vocab_size, n), "matrix"))
    return specs
