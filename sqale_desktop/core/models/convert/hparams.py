"""The text model's hyperparameters, read from a Qwen3.5 ``config.json``.

``Qwen3_5ForConditionalGeneration`` nests the language model's settings under ``text_config``
(next to an unused ``vision_config``); ``Qwen3_5ForCausalLM`` keeps them at the top level.  Both
are accepted.  Only what llama.cpp's ``qwen35`` loader reads is kept, and settings it cannot
represent are refused here, before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqale_desktop.core.engines.qwen35_layout import Qwen35Shape
from sqale_desktop.core.models.convert.errors import UnsupportedCheckpoint

SUPPORTED_ARCHITECTURES = ("Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM")
# Qwen3.5 always uses interleaved multimodal RoPE; llama.cpp requires the sections (its own
# converter writes this default when a checkpoint omits them).
DEFAULT_MROPE_SECTION = (11, 11, 10, 0)


@dataclass(frozen=True)
class Qwen35Hparams:
    """Hyperparameters of the text model, named after the GGUF keys they become."""

    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    rms_eps: float
    vocab_size: int
    context_length: int
    rope_theta: float
    rope_dim: int
    mrope_section: tuple[int, int, int, int]
    full_attention_interval: int
    conv_kernel: int
    linear_k_head_dim: int
    linear_v_head_dim: int
    linear_k_heads: int
    linear_v_heads: int
    mtp_layers_in_config: int
    tie_word_embeddings: bool

    @property
    def linear_inner_size(self) -> int:
        return self.linear_v_head_dim * self.linear_v_heads

    def to_shape(self) -> Qwen35Shape:
        """The same hyperparameters as the shape llama.cpp's loader reads (``qwen35_layout``)."""
        return Qwen35Shape(
            vocab_size=self.vocab_size,
            hidden_size=self.n_embd,
            num_hidden_layers=self.n_layer,
            intermediate_size=self.n_ff,
            num_attention_heads=self.n_head,
            num_key_value_heads=self.n_head_kv,
            head_dim=self.head_dim,
            linear_num_key_heads=self.linear_k_heads,
            linear_num_value_heads=self.linear_v_heads,
            linear_key_head_dim=self.linear_k_head_dim,
            linear_value_head_dim=self.linear_v_head_dim,
            linear_conv_kernel_dim=self.conv_kernel,
            full_attention_interval=self.full_attention_interval,
            rms_norm_eps=self.rms_eps,
            rope_theta=self.rope_theta,
            partial_rotary_factor=self.rope_dim / self.head_dim,
            mrope_section=self.mrope_section,
            max_position_embeddings=self.context_length,
            tie_word_embeddings=self.tie_word_embeddings,
        )

    def is_recurrent(self, layer: int) -> bool:
        """Whether a trunk layer is Gated DeltaNet (linear attention) rather than full attention."""
        return (layer + 1) % self.full_attention_interval != 0


def read_hparams(config: dict[str, Any]) -> Qwen35Hparams:
    """Validate ``config.json`` and return the text model's hyperparameters."""
    architectures = config.get("architectures") or []
    if not any(a in SUPPORTED_ARCHITECTURES for a in architectures):
        raise UnsupportedCheckpoint(
            f"architecture {architectures or 'unknown'} is not supported; "
            f"expected one of {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    text: dict[str, Any] = {**config, **config.get("text_config", {})}
    try:
        rope: dict[str, Any] = text.get("rope_parameters") or text.get("rope_scaling") or {}
        head_dim = int(text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"])
        partial = float(rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 0.25)))
        section = list(rope.get("mrope_section") or DEFAULT_MROPE_SECTION)
        section = ([*section, 0, 0, 0, 0])[:4]
        hp = Qwen35Hparams(
            n_layer=int(text["num_hidden_layers"]),
            n_embd=int(text["hidden_size"]),
            n_ff=int(text["intermediate_size"]),
            n_head=int(text["num_attention_heads"]),
            n_head_kv=int(text["num_key_value_heads"]),
            head_dim=head_dim,
            rms_eps=float(text.get("rms_norm_eps", 1e-6)),
            vocab_size=int(text["vocab_size"]),
            context_length=int(text.get("max_position_embeddings", 262144)),
            rope_theta=float(rope.get("rope_theta", text.get("rope_theta", 10_000_000))),
            rope_dim=int(head_dim * partial),
            mrope_section=(int(section[0]), int(section[1]), int(section[2]), int(section[3])),
            full_attention_interval=int(text.get("full_attention_interval", 4)),
            conv_kernel=int(text["linear_conv_kernel_dim"]),
            linear_k_head_dim=int(text["linear_key_head_dim"]),
            linear_v_head_dim=int(text["linear_value_head_dim"]),
            linear_k_heads=int(text["linear_num_key_heads"]),
            linear_v_heads=int(text["linear_num_value_heads"]),
            mtp_layers_in_config=int(text.get("mtp_num_hidden_layers", 0)),
            tie_word_embeddings=bool(
                config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))
            ),
        )
    except KeyError as exc:
        raise UnsupportedCheckpoint(f"config.json lacks {exc.args[0]!r}") from exc
    _check(hp, text)
    return hp


def _check(hp: Qwen35Hparams, text: dict[str, Any]) -> None:
    # llama.cpp derives both linear-attention head sizes from one key (ssm.state_size).
    if hp.linear_k_head_dim != hp.linear_v_head_dim:
        raise UnsupportedCheckpoint(
            "linear attention key and value head sizes differ; llama.cpp needs them equal"
        )
    if hp.linear_v_heads % hp.linear_k_heads != 0:
        raise UnsupportedCheckpoint("linear attention value heads are not a multiple of key heads")
    # Without an explicit per-layer list llama.cpp places full attention every N-th layer.
    layer_types = text.get("layer_types")
    if layer_types is not None:
        expected = ["linear_attention" if hp.is_recurrent(i) else "full_attention" for i in range(hp.n_layer)]
        if list(layer_types) != expected:
            raise UnsupportedCheckpoint("layer_types does not follow full_attention_interval")
