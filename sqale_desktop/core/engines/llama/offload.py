"""GPU offload: which devices llama.cpp sees, how many layers fit on one, what loading really used.

Three questions the engine asks around ``llama_cpp.Llama(...)``:

1. *Which devices are there?*  llama-cpp-python binds none of ggml's backend-device API, so
   :func:`offload_devices` calls ``ggml_backend_dev_count/get/name/description/type/memory``
   through ctypes on the same ``libggml`` that ``llama_cpp`` loaded (``LLAMA_CPP_LIB_PATH``
   honoured, as llama-cpp-python does).  A CPU-only build lists no offload device.
2. *How many layers fit?*  :func:`read_footprint` sums, from the GGUF header alone, the bytes of
   each block's tensors and of the output head, and the per-layer attention KV (per token of
   context) and recurrent state (fixed); :func:`layers_that_fit` then takes as many of the last
   layers (llama.cpp offloads from the end) as fit the device's free memory after a reserve for
   compute buffers.  It is an estimate; step 3 says what happened.
3. *What did loading use?*  llama.cpp reports every buffer it allocates ("Vulkan0 model buffer
   size = 12.3 MiB", KV, RS, compute, output).  :class:`BufferReport` collects those lines
   from llama.cpp's log (``llama.native_log``) while a model loads, so the status line can say how much
   memory the device really holds.

Qt-free, like all of ``core``; ``llama_cpp`` is imported lazily.
"""

from __future__ import annotations

import ctypes
import math
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqale_desktop.core.engines.llama import backends, native_log
from sqale_desktop.core.engines.llama.ggml_library import ggml_path
from sqale_desktop.core.gguf_header import GgufUnreadable, read_header
from sqale_desktop.core.units import MIB, format_bytes

# enum ggml_backend_dev_type (ggml/include/ggml-backend.h)
_DEVICE_KINDS = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel", 4: "meta"}
_OFFLOAD_KINDS = frozenset({"gpu", "igpu"})
# Kept free on the device for llama.cpp's compute buffers (which grow with n_ubatch, ~124 MiB at
# 128 for the 2B model on the CPU) and for the driver; a share of the device for large cards.
_RESERVE_MIN = 384 * MIB
_RESERVE_SHARE = 0.05


@dataclass(frozen=True)
class OffloadDevice:
    """One device llama.cpp can put layers on, with its memory as the driver reports it now."""

    name: str
    description: str
    kind: str
    free_bytes: int
    total_bytes: int

    def label(self) -> str:
        """``Vulkan0 (llvmpipe (LLVM 15.0.6, 256 bits)), 12.1 of 23.4 GiB free``."""
        return (
            f"{self.name} ({self.description}), {format_bytes(self.free_bytes)} of "
            f"{format_bytes(self.total_bytes)} free"
        )


def _ggml() -> ctypes.CDLL | None:
    """The loaded ``libggml`` (opening an already loaded file returns the same handle).

    It holds the device registry (``ggml_backend_dev_count/get``); the per-device calls live in
    ``libggml-base``, which ``dlsym`` reaches through the handle's dependencies.
    """
    # Registers the dynamic backends first (a GGML_BACKEND_DL build has no device until then), and
    # opens the copy of libggml that libllama uses (ggml_library.ggml_path says why it matters).
    candidate = ggml_path(backends.load_backends().folder)
    if not candidate.exists():
        return None
    library = ctypes.CDLL(str(candidate))
    _declare(library)
    return library


def _declare(library: ctypes.CDLL) -> None:
    library.ggml_backend_dev_count.restype = ctypes.c_size_t
    library.ggml_backend_dev_count.argtypes = []
    library.ggml_backend_dev_get.restype = ctypes.c_void_p
    library.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    for name in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
        getattr(library, name).restype = ctypes.c_char_p
        getattr(library, name).argtypes = [ctypes.c_void_p]
    library.ggml_backend_dev_type.restype = ctypes.c_int
    library.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    library.ggml_backend_dev_memory.restype = None
    library.ggml_backend_dev_memory.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_size_t),
    ]


def offload_devices() -> list[OffloadDevice] | None:
    """The GPUs (discrete or integrated) the installed llama.cpp build can offload to.

    Empty for a CPU-only build; None where the library cannot be inspected (then the engine
    offloads as asked, without a plan).  Mesa's software
    Vulkan driver (lavapipe) reports itself as a CPU-type device; llama.cpp uses it only when
    ``GGML_VK_VISIBLE_DEVICES`` names it, and then presents it as a GPU, as this does.
    """
    try:
        library = _ggml()
    except (ImportError, OSError, AttributeError):
        return None
    if library is None:
        return None
    devices: list[OffloadDevice] = []
    for index in range(int(library.ggml_backend_dev_count())):
        device = library.ggml_backend_dev_get(index)
        if not device:
            continue
        kind = _DEVICE_KINDS.get(int(library.ggml_backend_dev_type(device)), "unknown")
        if kind not in _OFFLOAD_KINDS:
            continue
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        library.ggml_backend_dev_memory(device, ctypes.byref(free), ctypes.byref(total))
        devices.append(
            OffloadDevice(
                name=(library.ggml_backend_dev_name(device) or b"?").decode(errors="replace"),
                description=(library.ggml_backend_dev_description(device) or b"").decode(errors="replace"),
                kind=kind,
                free_bytes=int(free.value),
                total_bytes=int(total.value),
            )
        )
    return devices


@dataclass(frozen=True)
class ModelFootprint:
    """What offloading each part of a model costs in device memory, read from its GGUF header."""

    layer_bytes: tuple[int, ...]
    """Weights of each block, in block order."""
    output_bytes: int
    """The output head (for tied embeddings, the embedding matrix it reuses), offloaded with "all"."""
    kv_bytes_per_token: tuple[int, ...]
    """Attention K+V cache per token of context, per block (0 for recurrent blocks)."""
    state_bytes: tuple[int, ...]
    """Recurrent state per block, independent of the context (0 for attention blocks)."""

    @property
    def n_layers(self) -> int:
        return len(self.layer_bytes)

    def layers_bytes(self, layers: int, n_ctx: int) -> int:
        """Device bytes for offloading the last ``layers`` blocks (all of them plus the head)."""
        layers = max(0, min(layers, self.n_layers))
        chosen = range(self.n_layers - layers, self.n_layers)
        total = sum(
            self.layer_bytes[i] + self.kv_bytes_per_token[i] * n_ctx + self.state_bytes[i] for i in chosen
        )
        if layers == self.n_layers:
            total += self.output_bytes
        return total


_BLOCK = re.compile(r"^blk\.(\d+)\.")


def read_footprint(path: Path) -> ModelFootprint | None:
    """The model's offload costs, or None where the header cannot be read.

    The header is read by ``core.gguf_header``'s bounded scanner (not ``gguf.GGUFReader``,
    which a malformed file sends into IndexError, MemoryError or minutes of work): every failure
    there is a ``GgufUnreadable``, and so is a block count that the tensors cannot back.
    """
    try:
        arch, meta, layer_bytes, output, embedding = _footprint_header(path)
    except GgufUnreadable:
        return None

    def number(key: str, default: int = 0) -> int:
        value = meta.get(f"{arch}.{key}")
        if isinstance(value, list):
            value = max(value) if value else None
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            return default
        return int(value)

    n_layers = len(layer_bytes)
    head_kv = number("attention.head_count_kv", number("attention.head_count"))
    heads = max(number("attention.head_count", 1), 1)
    head_dim = number("attention.key_length", number("embedding_length") // heads)
    value_dim = number("attention.value_length", head_dim)
    interval = number("full_attention_interval")
    kv = []
    state = []
    conv_kernel = number("ssm.conv_kernel")
    inner = number("ssm.inner_size")
    state_size = number("ssm.state_size")
    groups = number("ssm.group_count")
    value_heads = number("ssm.time_step_rank")
    for block in range(n_layers):
        recurrent = conv_kernel > 0 and (interval == 0 or (block + 1) % interval != 0)
        if recurrent:
            kv.append(0)
            # f32 conv state over the mixed q/k/v channels, and one state_size² matrix per value head
            conv = max(conv_kernel - 1, 0) * (inner + 2 * groups * state_size) * 4
            ssm = value_heads * state_size * state_size * 4
            state.append(conv + ssm)
        else:
            kv.append(head_kv * (head_dim + value_dim) * 2)  # f16 K and V per token
            state.append(0)
    return ModelFootprint(
        layer_bytes=tuple(layer_bytes),
        output_bytes=output or embedding,
        kv_bytes_per_token=tuple(kv),
        state_bytes=tuple(state),
    )


def _footprint_header(path: Path) -> tuple[str, dict[str, Any], list[int], int, int]:
    """Architecture, metadata, bytes per block, output head and embedding bytes; ``GgufUnreadable``
    for any header this cannot use."""
    try:
        import gguf
    except ImportError:
        raise GgufUnreadable("the gguf package is not installed") from None
    # every value but the tokenizer's (its arrays are the vocabulary: large, and not needed here)
    header = read_header(path, lambda key: not key.startswith("tokenizer."), tensors=True)
    arch = header.metadata.get("general.architecture")
    n_layers = header.metadata.get(f"{arch}.block_count")
    if not isinstance(arch, str) or not isinstance(n_layers, int) or isinstance(n_layers, bool):
        raise GgufUnreadable(f"{path.name} names no architecture or block count")
    if not 0 < n_layers <= len(header.tensors):  # every block holds at least one tensor
        raise GgufUnreadable(f"{path.name} claims {n_layers:,} blocks for {len(header.tensors):,} tensors")
    layer_bytes = [0] * n_layers
    output = embedding = 0
    for tensor in header.tensors:
        try:
            block_size, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(tensor.ggml_type)]
        except (KeyError, ValueError):
            raise GgufUnreadable(
                f"{path.name}: tensor {tensor.name!r} has unknown type {tensor.ggml_type}"
            ) from None
        n_bytes = math.prod(tensor.shape) * type_size // block_size
        match = _BLOCK.match(tensor.name)
        if match and int(match.group(1)) < n_layers:
            layer_bytes[int(match.group(1))] += n_bytes
        elif tensor.name == "output.weight":
            output = n_bytes
        elif tensor.name == "token_embd.weight":
            embedding = n_bytes
    return arch, header.metadata, layer_bytes, output, embedding


def reserve_bytes(free_bytes: int) -> int:
    """Device memory left for compute buffers and the driver."""
    return max(_RESERVE_MIN, int(free_bytes * _RESERVE_SHARE))


def layers_that_fit(footprint: ModelFootprint, n_ctx: int, free_bytes: int) -> int:
    """How many of the last blocks fit in ``free_bytes`` with the reserve kept; ``n_layers + 1``
    means everything including the output head (llama.cpp's own convention for "all")."""
    budget = free_bytes - reserve_bytes(free_bytes)
    if budget <= 0:
        return 0
    if footprint.layers_bytes(footprint.n_layers, n_ctx) <= budget:
        return footprint.n_layers + 1
    fit = 0
    for layers in range(1, footprint.n_layers + 1):
        if footprint.layers_bytes(layers, n_ctx) > budget:
            break
        fit = layers
    return fit


_BUFFER_LINE = re.compile(
    r"(?P<buffer>[A-Za-z0-9_]+)\s+(?P<what>model|KV|RS|compute|output)\s+buffer size"
    r"\s*=\s*(?P<mib>[0-9.]+)\s*MiB"
)


@dataclass
class BufferReport:
    """The buffers llama.cpp said it allocated while a model and its context were built."""

    buffers: list[tuple[str, str, int]] = field(default_factory=list)
    """(buffer name such as ``Vulkan0`` or ``CPU_Mapped``, what it holds, bytes)."""

    def feed(self, line: str) -> None:
        match = _BUFFER_LINE.search(line)
        if match:
            self.buffers.append((match["buffer"], match["what"], int(float(match["mib"]) * MIB)))

    @staticmethod
    def on_device(buffer: str) -> bool:
        """Device memory, not host memory (``CPU``, ``CPU_Mapped``, ``CPU_REPACK``, ``Vulkan_Host``)."""
        return not buffer.upper().startswith("CPU") and not buffer.endswith("_Host")

    def device_bytes(self, holding: frozenset[str] | None = None) -> int:
        """Bytes on devices, of every buffer or only those holding ``{"model", "KV", "RS", ...}``.

        Even with no layers offloaded a GPU build keeps a small compute buffer on the device
        (llama.cpp runs large batched matrix products there).
        """
        return sum(
            size
            for buffer, what, size in self.buffers
            if self.on_device(buffer) and (holding is None or what in holding)
        )

    def device_names(self) -> list[str]:
        return sorted({buffer for buffer, _what, _size in self.buffers if self.on_device(buffer)})


WEIGHTS_AND_CACHES = frozenset({"model", "KV", "RS"})

_capture_lock = threading.RLock()


@contextmanager
def buffer_report() -> Iterator[BufferReport]:
    """Collect llama.cpp's buffer-size lines for the duration of the block.

    One thread at a time (llama.cpp's log callback is process-wide); blocks may nest in that thread.
    """
    report = BufferReport()
    with _capture_lock:
        native_log.install()
        native_log.listen(report.feed)
        try:
            yield report
        finally:
            native_log.unlisten(report.feed)
