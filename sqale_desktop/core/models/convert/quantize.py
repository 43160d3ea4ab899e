"""Quantize a GGUF with llama.cpp's own quantizer, in a child process.

``llama_model_quantize`` is one blocking C call (about a minute for the 2B model): running it in
a child process is what makes it cancellable (the child is terminated) and keeps a crash in
native code from taking the app down.  The child's log lines ``[  i/  n] name ...`` give progress.

The child runs ``child_main([IN, OUT, TYPE, THREADS])`` (started as ``sqale-desktop --child-module
sqale_desktop.core.models.convert.quantize ...``, see ``child.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from sqale_desktop.core.models.convert.child import child_command, child_env
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
    """Quantize ``src`` into ``dst``; ``dst`` is removed if anything goes wrong."""
    if quant not in QUANT_TYPES:
        raise QuantizationFailed(f"unknown quantization {quant!r}; choose one of {', '.join(QUANT_TYPES)}")
    n_threads = threads or max(1, os.cpu_count() or 1)
    cmd = child_command(__name__, str(src), str(dst), quant, str(n_threads))
    tail: list[bytes] = []
    stop = threading.Event()
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=child_env()) as proc:

        def watch_cancel() -> None:
            while not stop.wait(0.1):
                if cancel is not None and cancel.is_set():
                    proc.terminate()
                    return

        watcher = threading.Thread(target=watch_cancel, name="quantize-cancel", daemon=True)
        watcher.start()
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                tail = [*tail[-19:], line]
                match = _PROGRESS.search(line)
                if match and progress is not None:
                    progress(int(match[1]), int(match[2]), match[3].decode("utf-8", "replace"))
            code = proc.wait()
        finally:
            stop.set()
            watcher.join()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if cancel is not None and cancel.is_set():
        dst.unlink(missing_ok=True)
        raise ConversionCancelled("conversion cancelled during quantization")
    if code != 0 or not dst.is_file():
        dst.unlink(missing_ok=True)
        detail = b"".join(tail).decode("utf-8", "replace").strip().splitlines()[-3:]
        raise QuantizationFailed(f"llama.cpp could not quantize the model ({'; '.join(detail) or code})")


def child_main(argv: Sequence[str]) -> int:
    """The child process: run llama.cpp's quantizer; its status is the exit status."""
    import llama_cpp

    src, dst, quant, threads = argv
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, QUANT_TYPES[quant])
    params.nthread = int(threads)
    return int(llama_cpp.llama_model_quantize(src.encode(), dst.encode(), params))


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
