"""Write the unquantized GGUF (BF16/F16 weights, F32 norms) one tensor at a time.

``GGUFWriter.add_tensor`` keeps every array until the file is written, which would hold the
whole model in memory.  Instead all tensor infos (names, shapes, types) are declared up front
from the plan and ``GGUFWriter`` writes the header, metadata and tensor infos; the data section
is then streamed here, each tensor in row blocks, with the same alignment padding GGUFWriter
uses (``data_alignment``), so peak memory is about one block, not one tensor.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np

from sqale_desktop.core.engines.qwen35_layout import apply_metadata
from sqale_desktop.core.models.convert.checkpoint import Checkpoint
from sqale_desktop.core.models.convert.errors import ConversionCancelled
from sqale_desktop.core.models.convert.hparams import Qwen35Hparams
from sqale_desktop.core.models.convert.layout import ARCH, TensorPlan
from sqale_desktop.core.models.convert.vocab import write_generation_config, write_vocab

# (tensors written, tensors in total, GGUF name of the tensor just written)
TensorProgress = Callable[[int, int, str], None]
_STORED = {gguf.GGMLQuantizationType.F32: np.float32, gguf.GGMLQuantizationType.F16: np.float16}


def write_gguf(
    ckpt: Checkpoint,
    hp: Qwen35Hparams,
    plan: TensorPlan,
    out_path: Path,
    *,
    name: str,
    cancel: threading.Event | None = None,
    progress: TensorProgress | None = None,
) -> None:
    """Write ``plan`` to ``out_path``; raises ConversionCancelled between tensors when asked."""
    writer = gguf.GGUFWriter(out_path, ARCH)
    try:
        _write_metadata(writer, ckpt.folder, hp, plan, name)
        for tensor in plan.tensors:
            dtype = _STORED.get(tensor.qtype, np.uint16)  # BF16 travels as its uint16 bits
            writer.add_tensor_info(
                tensor.gguf_name, tensor.shape, np.dtype(dtype), tensor.nbytes, raw_dtype=tensor.qtype
            )
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        assert writer.fout is not None
        fout = writer.fout[0]
        align = writer.data_alignment
        total = len(plan.tensors)
        for done, tensor in enumerate(plan.tensors, start=1):
            if cancel is not None and cancel.is_set():
                raise ConversionCancelled("conversion cancelled")
            fout.write(bytes(-fout.tell() % align))
            written = 0
            for block in tensor.chunks():
                np.ascontiguousarray(block).tofile(fout)
                written += block.nbytes
            if written != tensor.nbytes:
                raise AssertionError(f"{tensor.gguf_name}: wrote {written} bytes, planned {tensor.nbytes}")
            if progress is not None:
                progress(done, total, tensor.gguf_name)
        fout.write(bytes(-fout.tell() % align))
        writer.flush()
    finally:
        writer.close()


def _write_metadata(
    writer: gguf.GGUFWriter, folder: Path, hp: Qwen35Hparams, plan: TensorPlan, name: str
) -> None:
    writer.add_name(name)
    writer.add_file_type(plan.file_type)
    apply_metadata(writer, hp.to_shape(), block_count=plan.block_count)
    if plan.mtp_written:
        writer.add_nextn_predict_layers(plan.block_count - hp.n_layer)
    write_vocab(writer, folder, hp.vocab_size)
    write_generation_config(writer, folder)
