"""Quantize a GGUF with llama.cpp's own quantizer, in a child process.

``llama_model_quantize`` is one blocking C call (about a minute for the 2B model): running it in
a child process (``core.child``) is what makes it cancellable (the child is killed on Stop) and
keeps a crash in native code from taking the app down.  The child's log lines ``[  i/  n] name
...`` on stderr give progress.  The plan (input, output, type, threads) goes to the child's stdin.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqale_desktop.core import child
from sqale_desktop.core.models.convert.errors import ConversionCancelled, QuantizationFailed

# User-facing names -> llama_cpp's LLAMA_FTYPE_* constant names.
QUANT_TYPES = {
    "Q4_K_M": "LLAMA_FTYPE_MOSTLY_Q4_K_M",
    "Q5_K_M": "LLAMA_FTYPE_MOSTLY_Q5_K_M",
    "Q6_K": "LLAMA_FTYPE_MOSTLY_Q6_K",
    "Q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
    "F16": "LLAMA_FTYPE_MOSTLY_F16",
}
DEFAULT_QUANT = "Q4_K_M"
# Bytes per weight of the 2-D tensors after quantization, for the disk-space estimate.
BYTES_PER_WEIGHT = {"Q4_K_M": 0.61, "Q5_K_M": 0.72, "Q6_K": 0.83, "Q8_0": 1.07, "F16": 2.0}
_PROGRESS = re.compile(rb"\[\s*(\d+)/\s*(\d+)\]\s+(\S+)")

QuantProgress = Callable[[int, int, str], None]


def quantize(
    src: Path,
    dst: Path,
    quant: str,
    *,
    threads: int | None = None,
    cancel: threading.Event | None = None,
    progress: QuantProgress | None = None,
) -> None:
    """Quantize ``src`` into ``dst``; ``dst`` is removed if anything goes wrong.

    No memory cap: llama.cpp maps the whole model, which an address-space cap would count."""
    if quant not in QUANT_TYPES:
        raise QuantizationFailed(f"unknown quantization {quant!r}; choose one of {', '.join(QUANT_TYPES)}")
    n_threads = threads or max(1, os.cpu_count() or 1)

    def log_line(line: bytes) -> None:
        match = _PROGRESS.search(line)
        if match and progress is not None:
            progress(int(match[1]), int(match[2]), match[3].decode("utf-8", "replace"))

    plan = {"src": str(src), "dst": str(dst), "quant": quant, "threads": n_threads}
    try:
        child.run(__name__, plan, what="the quantizer", cancel=cancel, on_stderr=log_line, memory_mb=None)
    except child.ChildStopped:
        dst.unlink(missing_ok=True)
        raise ConversionCancelled("conversion cancelled during quantization") from None
    except (child.ChildDied, child.ChildFailed) as exc:
        dst.unlink(missing_ok=True)
        raise QuantizationFailed(f"llama.cpp could not quantize the model ({exc})") from None
    if not dst.is_file():
        raise QuantizationFailed("llama.cpp could not quantize the model (it wrote no file)")


def _quantize(plan: dict[str, Any], _endpoint: child.Endpoint) -> dict[str, Any]:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, QUANT_TYPES[plan["quant"]])
    params.nthread = int(plan["threads"])
    status = int(llama_cpp.llama_model_quantize(plan["src"].encode(), plan["dst"].encode(), params))
    if status != 0:
        raise QuantizationFailed(f"llama_model_quantize returned {status}")
    return {}


def child_main(argv: Sequence[str]) -> int:
    """The child process (plan on stdin): run llama.cpp's quantizer."""
    del argv
    return child.serve(_quantize)


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
