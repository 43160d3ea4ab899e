"""Which checkpoint tensor becomes which GGUF tensor, and how it is transformed on the way.

The mapping and transforms follow llama.cpp's own converter for ``Qwen3_5ForConditionalGeneration``
(``conversion/qwen.py`` in the llama.cpp vendored by llama-cpp-python 0.3.36: ``Qwen3NextModel``,
``_LinearAttentionVReorderBase``, ``_QwenMtpMixin``) and the shapes its ``qwen35`` loader checks
(``src/models/qwen35.cpp``):

- Qwen3.5's RMSNorm multiplies by ``1 + weight``; llama.cpp multiplies by the weight, so every norm
  gets ``+1`` except the Gated DeltaNet output norm (``linear_attn.norm``), which is a plain one.
- ``A_log`` is stored as ``-exp(A_log)`` (``ssm_a``); ``dt_bias`` becomes ``ssm_dt.bias``; the
  depthwise conv kernel loses its singleton axis.
- When there are fewer key heads than value heads, value heads are reordered from grouped to
  tiled order (ggml broadcasts that way) in every tensor that has a value-head axis.
- The vision tower is skipped.  The multi-token-prediction block (``mtp.*``) is written as an extra
  block with ``nextn`` tensors only when all of its weights are in the checkpoint: checkpoints
  saved through transformers drop them while ``config.json`` still says ``mtp_num_hidden_layers``.

Shapes here are numpy order (row-major, the reverse of ggml's ``ne``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import gguf
import numpy as np
import numpy.typing as npt

from sqale_desktop.core.models.convert.checkpoint import Checkpoint, to_float32
from sqale_desktop.core.models.convert.errors import UnsupportedCheckpoint
from sqale_desktop.core.models.convert.hparams import Qwen35Hparams

QType = gguf.GGMLQuantizationType
Array = npt.NDArray[np.generic]

ARCH = "qwen35"
_TEXT_PREFIXES = ("model.language_model.", "model.")
_SKIPPED_PREFIXES = ("model.visual.", "visual.", "model.vision_tower.")
_MTP_REQUIRED = (
    "fc.weight",
    "pre_fc_norm_embedding.weight",
    "pre_fc_norm_hidden.weight",
    "layers.0.input_layernorm.weight",
    "layers.0.post_attention_layernorm.weight",
    "layers.0.self_attn.q_proj.weight",
    "layers.0.self_attn.k_proj.weight",
    "layers.0.self_attn.v_proj.weight",
    "layers.0.self_attn.o_proj.weight",
    "layers.0.self_attn.q_norm.weight",
    "layers.0.self_attn.k_norm.weight",
    "layers.0.mlp.gate_proj.weight",
    "layers.0.mlp.up_proj.weight",
    "layers.0.mlp.down_proj.weight",
)
_MTP_GLOBAL = {
    "fc.weight": "nextn.eh_proj.weight",
    "pre_fc_norm_embedding.weight": "nextn.enorm.weight",
    "pre_fc_norm_hidden.weight": "nextn.hnorm.weight",
    "norm.weight": "nextn.shared_head_norm.weight",
}
_BLOCK_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "linear_attn.in_proj_qkv.weight": "attn_qkv.weight",
    "linear_attn.in_proj_z.weight": "attn_gate.weight",
    "linear_attn.in_proj_b.weight": "ssm_beta.weight",
    "linear_attn.in_proj_a.weight": "ssm_alpha.weight",
    "linear_attn.conv1d.weight": "ssm_conv1d.weight",
    "linear_attn.dt_bias": "ssm_dt.bias",
    "linear_attn.A_log": "ssm_a",
    "linear_attn.norm.weight": "ssm_norm.weight",
    "linear_attn.out_proj.weight": "ssm_out.weight",
}
CHUNK_BYTES = 32 * 1024 * 1024  # rows are streamed in blocks of about this size


@dataclass(frozen=True)
class PlannedTensor:
    """One GGUF tensor: its source, final shape and type, and how to produce its bytes."""

    gguf_name: str
    source: str
    shape: tuple[int, ...]
    qtype: QType
    chunks: Callable[[], Iterator[Array]] = field(repr=False, compare=False)
    """Yields the tensor's bytes in order, as consecutive row blocks (or one array)."""

    @property
    def nbytes(self) -> int:
        elements = int(np.prod(self.shape, dtype=np.int64))
        return elements * (4 if self.qtype == QType.F32 else 2)


@dataclass(frozen=True)
class TensorPlan:
    """Every tensor to write, in order, plus what was left out and why."""

    tensors: list[PlannedTensor]
    block_count: int
    mtp_written: bool
    skipped: dict[str, str]
    file_type: int

    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


def plan_tensors(ckpt: Checkpoint, hp: Qwen35Hparams, include_mtp: bool = True) -> TensorPlan:
    """Map every text tensor of the checkpoint to its GGUF tensor; refuse unknown ones."""
    skipped: dict[str, str] = {}
    trunk: dict[str, str] = {}
    mtp: dict[str, str] = {}
    lm_head: str | None = None
    for name in ckpt.names():
        if name.startswith(_SKIPPED_PREFIXES):
            skipped[name] = "vision tower"
            continue
        for prefix in ("model.mtp.", "mtp."):
            if name.startswith(prefix):
                mtp[name.removeprefix(prefix)] = name
                break
        else:
            if name == "lm_head.weight":
                lm_head = name
                continue
            for prefix in _TEXT_PREFIXES:
                if name.startswith(prefix):
                    trunk[name.removeprefix(prefix)] = name
                    break
            else:
                raise UnsupportedCheckpoint(f"unexpected tensor {name!r}")

    write_mtp = include_mtp and _mtp_complete(mtp)
    reason = "excluded by request" if not include_mtp else "incomplete multi-token-prediction block"
    if not write_mtp:
        skipped.update({source: reason for source in mtp.values()})
    elif any(not k.startswith("layers.0.") and k.startswith("layers.") for k in mtp):
        raise UnsupportedCheckpoint("more than one multi-token-prediction block; llama.cpp supports one")

    maker = _Maker(ckpt, hp)
    tensors: list[PlannedTensor] = []
    tensors.append(
        maker.make("token_embd.weight", _need(trunk, "embed_tokens.weight"), (hp.vocab_size, hp.n_embd))
    )
    tensors.append(maker.make("output_norm.weight", _need(trunk, "norm.weight"), (hp.n_embd,), add_one=True))
    if lm_head is not None and not hp.tie_word_embeddings:
        tensors.append(maker.make("output.weight", lm_head, (hp.vocab_size, hp.n_embd)))
    elif lm_head is not None:
        skipped[lm_head] = "tied to the token embedding"
    elif not hp.tie_word_embeddings:
        raise UnsupportedCheckpoint("lm_head.weight is missing and the embeddings are not tied")

    known = {"embed_tokens.weight", "norm.weight"}
    for layer in range(hp.n_layer):
        for suffix, gname in _BLOCK_NAMES.items():
            key = f"layers.{layer}.{suffix}"
            if key in trunk:
                tensors.append(maker.block_tensor(layer, gname, trunk[key], recurrent=hp.is_recurrent(layer)))
                known.add(key)
        _check_block(trunk, layer, hp)
    unknown = sorted(set(trunk) - known)
    if unknown:
        raise UnsupportedCheckpoint(f"unexpected text tensors, e.g. {unknown[0]!r}")

    if write_mtp:
        layer = hp.n_layer
        for suffix, gname in _BLOCK_NAMES.items():
            key = f"layers.0.{suffix}"
            if key in mtp:
                tensors.append(maker.block_tensor(layer, gname, mtp[key], recurrent=False))
        for key, gname in _MTP_GLOBAL.items():
            if key in mtp:
                shape = (hp.n_embd, 2 * hp.n_embd) if key == "fc.weight" else (hp.n_embd,)
                tensors.append(
                    maker.make(f"blk.{layer}.{gname}", mtp[key], shape, add_one=key != "fc.weight")
                )

    embd_dtype = ckpt.entry(_need(trunk, "embed_tokens.weight")).dtype
    file_type = gguf.LlamaFileType.MOSTLY_BF16 if embd_dtype == "BF16" else gguf.LlamaFileType.MOSTLY_F16
    return TensorPlan(
        tensors=tensors,
        block_count=hp.n_layer + (1 if write_mtp else 0),
        mtp_written=write_mtp,
        skipped=skipped,
        file_type=int(file_type),
    )


def _need(names: dict[str, str], key: str) -> str:
    if key not in names:
        raise UnsupportedCheckpoint(f"the checkpoint lacks the tensor {key!r}")
    return names[key]


def _mtp_complete(mtp: dict[str, str]) -> bool:
    return bool(mtp) and all(k in mtp for k in _MTP_REQUIRED)


def _check_block(trunk: dict[str, str], layer: int, hp: Qwen35Hparams) -> None:
    common = ("input_layernorm.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight")
    kind = "linear_attn.in_proj_qkv.weight" if hp.is_recurrent(layer) else "self_attn.q_proj.weight"
    for suffix in (*common, kind):
        _need(trunk, f"layers.{layer}.{suffix}")


class _Maker:
    """Builds PlannedTensors: expected shapes from the hyperparameters, lazy producers."""

    def __init__(self, ckpt: Checkpoint, hp: Qwen35Hparams) -> None:
        self.ckpt = ckpt
        self.hp = hp
        self.v_per_k = hp.linear_v_heads // hp.linear_k_heads
        self.reorder = self.v_per_k > 1

    def block_tensor(self, layer: int, gname: str, source: str, recurrent: bool) -> PlannedTensor:
        hp = self.hp
        full = f"blk.{layer}.{gname}"
        key_dim = hp.linear_k_head_dim * hp.linear_k_heads
        value_dim = hp.linear_inner_size
        conv_dim = 2 * key_dim + value_dim
        vd = hp.linear_v_head_dim
        shapes: dict[str, tuple[int, ...]] = {
            "attn_norm.weight": (hp.n_embd,),
            "post_attention_norm.weight": (hp.n_embd,),
            "ffn_gate.weight": (hp.n_ff, hp.n_embd),
            "ffn_up.weight": (hp.n_ff, hp.n_embd),
            "ffn_down.weight": (hp.n_embd, hp.n_ff),
            # q_proj carries the output gate too: twice the query width.
            "attn_q.weight": (2 * hp.n_head * hp.head_dim, hp.n_embd),
            "attn_k.weight": (hp.n_head_kv * hp.head_dim, hp.n_embd),
            "attn_v.weight": (hp.n_head_kv * hp.head_dim, hp.n_embd),
            "attn_output.weight": (hp.n_embd, hp.n_head * hp.head_dim),
            "attn_q_norm.weight": (hp.head_dim,),
            "attn_k_norm.weight": (hp.head_dim,),
            "attn_qkv.weight": (conv_dim, hp.n_embd),
            "attn_gate.weight": (value_dim, hp.n_embd),
            "ssm_beta.weight": (hp.linear_v_heads, hp.n_embd),
            "ssm_alpha.weight": (hp.linear_v_heads, hp.n_embd),
            "ssm_conv1d.weight": (conv_dim, hp.conv_kernel),
            "ssm_dt.bias": (hp.linear_v_heads,),
            "ssm_a": (hp.linear_v_heads,),
            "ssm_norm.weight": (vd,),
            "ssm_out.weight": (hp.n_embd, value_dim),
        }
        is_linear = gname.startswith(("ssm_", "attn_qkv", "attn_gate"))
        is_full = gname.startswith(
            ("attn_q.", "attn_k.", "attn_v.", "attn_output", "attn_q_norm", "attn_k_norm")
        )
        if (is_linear and not recurrent) or (is_full and recurrent):
            raise UnsupportedCheckpoint(f"{source} does not match the layer's attention type")
        shape = shapes[gname]
        norm = gname.endswith("norm.weight") and gname != "ssm_norm.weight"
        if gname == "attn_qkv.weight":
            return self.make(full, source, shape, reorder=(0, vd, 2 * key_dim))
        if gname == "attn_gate.weight":
            return self.make(full, source, shape, reorder=(0, vd, 0))
        if gname in ("ssm_beta.weight", "ssm_alpha.weight", "ssm_dt.bias"):
            return self.make(full, source, shape, reorder=(0, 1, 0), force_f32=gname == "ssm_dt.bias")
        if gname == "ssm_a":
            return self.make(full, source, shape, reorder=(0, 1, 0), neg_exp=True)
        if gname == "ssm_conv1d.weight":
            return self.make(full, source, shape, reorder=(0, vd, 2 * key_dim), squeeze=True, force_f32=True)
        if gname == "ssm_out.weight":
            return self.make(full, source, shape, reorder=(1, vd, 0))
        return self.make(full, source, shape, add_one=norm)

    def make(
        self,
        gguf_name: str,
        source: str,
        shape: tuple[int, ...],
        *,
        add_one: bool = False,
        neg_exp: bool = False,
        squeeze: bool = False,
        force_f32: bool = False,
        reorder: tuple[int, int, int] | None = None,
    ) -> PlannedTensor:
        """Plan one tensor; ``reorder`` is (axis, value head size, offset of the value part)."""
        entry = self.ckpt.entry(source)
        got = tuple(d for d in entry.shape if d != 1) if squeeze else entry.shape
        if got != shape:
            raise UnsupportedCheckpoint(f"{source} has shape {entry.shape}, expected {shape}")
        as_float = add_one or neg_exp or force_f32 or len(shape) == 1
        qtype = QType.F32 if as_float else (QType.BF16 if entry.dtype == "BF16" else QType.F16)
        v_reorder = reorder if self.reorder else None

        def produce() -> Array:
            data: Array = self.ckpt.read(source)
            if squeeze:
                data = data.reshape(shape)
            if v_reorder is not None:
                axis, head, start = v_reorder
                data = reorder_v_heads(data, axis, start, self.hp.linear_k_heads, self.v_per_k, head)
            if as_float:
                values = to_float32(data, entry.dtype)
                if add_one:
                    values = values + np.float32(1.0)
                if neg_exp:
                    values = -np.exp(values)
                return np.ascontiguousarray(values, dtype=np.float32)
            if entry.dtype == "F32":
                return np.ascontiguousarray(data, dtype=np.float16)
            return np.ascontiguousarray(data)

        def stream_rows() -> Iterator[Array]:
            # Weights copied as they are (or only cast): row blocks, never the whole tensor.
            rows = shape[0]
            row_bytes = max(1, entry.nbytes // rows)
            step = max(1, CHUNK_BYTES // row_bytes)
            for start in range(0, rows, step):
                block = self.ckpt.read_rows(source, start, min(rows, start + step))
                yield block.astype(np.float16) if entry.dtype == "F32" else block

        def whole() -> Iterator[Array]:
            yield produce()

        simple = not as_float and v_reorder is None and not squeeze
        return PlannedTensor(gguf_name, source, shape, qtype, stream_rows if simple else whole)


def reorder_v_heads(data: Array, axis: int, start: int, k_heads: int, v_per_k: int, head: int) -> Array:
    """Reorder value heads along ``axis`` from index ``start`` on: grouped by key head -> tiled.

    HF stores [G0_v0..v(r-1), G1_v0.., ...]; ggml broadcasts as [K0, K1, ..., K0, K1, ...], so the
    result is [G0_v0, G1_v0, ..., G0_v1, G1_v1, ...] (``_reorder_v_heads`` in llama.cpp).
    """
    moved = np.moveaxis(np.asarray(data), axis, 0)
    head_part, value_part = moved[:start], moved[start:]
    rest = value_part.shape[1:]
    grouped = value_part.reshape(k_heads, v_per_k, head, *rest)
    tiled = np.swapaxes(grouped, 0, 1).reshape(value_part.shape)
    merged = np.concatenate([head_part, tiled], axis=0) if start else tiled
    return np.ascontiguousarray(np.moveaxis(merged, 0, axis))
