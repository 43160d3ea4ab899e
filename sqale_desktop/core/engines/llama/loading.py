"""Loading a GGUF: the offload plan, the attempts, what they cost, the vocabulary, one frozen record.

Everything the engine learns while loading ends up in :class:`LoadedModel` and is not changed
afterwards: how many layers went where (and whether that is fewer than asked), the notes the
status line and the log show, the vocabulary with its special ids, and how rejected drafts
will be rolled back on this model.  The engine only keeps the record; nothing here knows of
sessions or speculation.

``llama_cpp`` is imported inside :func:`load_model`, never at the top: the engine sets the
OpenMP wait policy before the library loads (``thread_policy``).
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sqale_desktop.core.engine_options import GpuLayers
from sqale_desktop.core.engines.base import EngineError
from sqale_desktop.core.engines.llama import native_log, offload
from sqale_desktop.core.engines.llama.backends import Backends, load_backends
from sqale_desktop.core.units import MIB, format_bytes

Rollback = Literal["auto", "snapshots", "partial-state", "full-state"]
"""The rollback asked for; ``LoadedModel.rollback`` says what the model allows."""

LoadProgress = Callable[[float], None]
"""Called with the fraction of loading done, 0.0 to 1.0, on the loading thread."""

_ALL_LAYERS = -1
# Reading the model file ahead of llama.cpp, in blocks this size, is what the load progress shows.
READ_BLOCK = 16 * MIB
# Share of the progress bar for reading the file; the rest is llama.cpp building the model.
READ_SHARE = 0.9


@dataclass(frozen=True)
class LoadRequest:
    """What the engine was asked for; the same request loads the same way every time."""

    path: Path
    n_ctx: int
    n_batch: int
    n_ubatch: int
    n_threads: int
    gpu_layers: GpuLayers
    # The device to offload to where there are several (``Vulkan1``); "": the most free memory.
    gpu_device: str
    # Device bytes "auto" may plan for, below what the device reports free (tests, shared cards).
    gpu_memory_limit: int | None
    verbose: bool
    # Speculation needs flash attention (exact logits in a batch) and, where granted, n_rs_seq.
    speculate: bool
    rollback: Rollback
    draft_max: int


@dataclass(frozen=True)
class Vocabulary:
    """The model's vocabulary: tokenizing, token pieces (cached), end-of-generation, special ids."""

    lib: Any
    llama: Any
    handle: Any
    n_vocab: int
    add_bos: bool
    bos: int
    im_end: int | None
    endoftext: int | None
    think_end: int | None
    _pieces: dict[int, bytes] = field(default_factory=dict, compare=False, repr=False)

    def tokenize(self, text: str) -> list[int]:
        """Text tokenized on its own: special tokens parsed, no BOS."""
        return [int(t) for t in self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)]

    def piece(self, token: int) -> bytes:
        """The bytes of one token, special tokens rendered (``<think>`` must reach the prompt text)."""
        cached = self._pieces.get(token)
        if cached is not None:
            return cached
        buf = ctypes.create_string_buffer(64)
        n = self.lib.llama_token_to_piece(self.handle, token, buf, len(buf), 0, True)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self.lib.llama_token_to_piece(self.handle, token, buf, len(buf), 0, True)
        piece = buf.raw[:n]
        self._pieces[token] = piece
        return piece

    def is_eog(self, token: int) -> bool:
        return bool(self.lib.llama_vocab_is_eog(self.handle, token))


@dataclass(frozen=True)
class LoadedModel:
    """A loaded model and everything loading decided; the engine's only record of it."""

    llama: Any
    lib: Any
    vocabulary: Vocabulary
    n_layers: int
    gpu_layers: int
    device: offload.OffloadDevice | None
    device_bytes: int
    # True when loading with more GPU layers failed and fewer (or none) were used.
    offload_failed: bool
    notes: tuple[str, ...]
    # How rejected drafts leave memory: "truncate" (attention-only model), "snapshots"
    # (llama.cpp's per-token recurrent snapshots, n_rs_seq), "partial-state" / "full-state"
    # (restore a state copy, then re-evaluate the accepted tokens).
    rollback: str
    weights_bytes: int
    resident_bytes: int
    backends: Backends
    """The CPU variant and GPU backends this process runs on (``backends.load_backends``)."""

    @property
    def ctx(self) -> Any:
        """The llama.cpp context pointer (``llama_context *``)."""
        return self.llama.ctx


@contextlib.contextmanager
def context_fields(module: Any, **fields: Any) -> Iterator[None]:
    """Context parameters ``llama_cpp.Llama`` does not expose (``n_rs_seq``), set while it builds one.

    ``Llama`` starts from ``llama_context_default_params()`` and overwrites only the fields it
    knows; wrapping that function for the duration of the constructor is the one way in
    without rebuilding the context by hand.  Loading happens on the engine's owner thread.
    """
    original = module.llama_context_default_params

    def patched() -> Any:
        params = original()
        for name, value in fields.items():
            setattr(params, name, value)
        return params

    module.llama_context_default_params = patched
    try:
        yield
    finally:
        module.llama_context_default_params = original


def gpu_layer_attempts(
    requested: GpuLayers, supports_offload: bool, n_layers: int | None, fit: int | None = None
) -> list[int]:
    """The ``n_gpu_layers`` values to try in order, ending on the CPU (0).

    "auto" offloads what fits (``fit``, from :func:`offload.layers_that_fit`; ``n_layers + 1`` or
    None means everything); "all" and a number are taken as asked.  When loading with offload
    fails (not enough GPU memory, driver trouble), fewer layers are tried, then none.  "none" is 0.
    """
    if not supports_offload or requested == "none":
        return [0]
    if requested == "auto" and fit is not None and n_layers is not None and fit <= n_layers:
        first = fit
    else:
        first = _ALL_LAYERS if requested == "auto" or requested == "all" else int(requested)
    if first == 0:
        return [0]
    attempts = [first]
    layers = n_layers if first < 0 else first
    if layers:
        half = layers // 2
        while half >= 1:
            attempts.append(half)
            half //= 2
    attempts.append(0)
    return attempts


def load_model(request: LoadRequest, progress: LoadProgress | None = None) -> LoadedModel:
    """Load ``request.path``, retrying with fewer GPU layers; raises ``EngineError`` when nothing loads.

    With ``progress``, the file is first read through once in blocks, reporting how far it got:
    llama.cpp maps the file and offers no progress of its own through llama-cpp-python, and on
    a cold disk reading the weights is most of the wait (and otherwise lands on the first
    question, as page faults).
    """
    path = request.path
    if not path.is_file():
        raise EngineError(f"model file not found: {path}")
    if progress is not None:
        _read_through(path, lambda fraction: progress(fraction * READ_SHARE))
    import llama_cpp

    native_log.install()
    try:
        loaded_backends = load_backends()
    except OSError as exc:
        raise EngineError(f"could not load llama.cpp's backends: {exc}") from exc
    notes: list[str] = list(loaded_backends.notes)
    supports = bool(llama_cpp.llama_supports_gpu_offload())
    devices = offload.offload_devices() if supports else []
    if supports and devices == []:
        # A GPU build on a machine without a usable device: llama.cpp would run on the CPU anyway.
        supports = False
    device, device_index = choose_device(devices or [], request.gpu_device, notes)
    # One device, not llama.cpp's default split over all of them: the one chosen in Settings or
    # the one with the most free memory (a split over unequal cards is paced by the slowest).
    placement: dict[str, Any] = {}
    if device is not None and len(devices or []) > 1:
        placement = {"split_mode": llama_cpp.LLAMA_SPLIT_MODE_NONE, "main_gpu": device_index}
    # One read of the header (seconds on a large file): how many layers "all" means, and for
    # "auto" what each costs on the device.
    footprint = offload.read_footprint(path) if supports else None
    attempts = gpu_layer_attempts(
        request.gpu_layers,
        supports,
        footprint.n_layers if footprint is not None else None,
        _layers_that_fit(request, device, footprint, notes),
    )
    rss_before, file_before = _rss_bytes()
    errors: list[str] = []
    snapshots = request.speculate and request.rollback in ("auto", "snapshots")
    extra = {"n_rs_seq": request.draft_max} if snapshots else {}
    report = offload.BufferReport()
    llama: Any = None
    for layers in attempts:
        try:
            with offload.buffer_report() as report, context_fields(llama_cpp.llama_cpp, **extra):
                llama = llama_cpp.Llama(
                    str(path),
                    n_ctx=request.n_ctx,
                    n_batch=request.n_batch,
                    n_ubatch=request.n_ubatch,
                    n_threads=request.n_threads,
                    n_threads_batch=request.n_threads,
                    n_gpu_layers=layers,
                    # Exactness: without flash attention, llama.cpp's CPU attention gives a
                    # token evaluated in a batch of 3+ other logits than the same token
                    # decoded alone (up to 1.0 on SmolLM2); with it they are bit-identical.
                    flash_attn=request.speculate,
                    verbose=request.verbose,
                    **placement,
                )
        except (ValueError, RuntimeError, OSError) as exc:
            errors.append(f"n_gpu_layers={layers}: {exc}")
            continue
        break
    if llama is None:
        raise EngineError(f"could not load {path.name}: " + "; ".join(errors))
    if progress is not None:
        progress(1.0)
    n_layers = int(llama_cpp.llama_model_n_layer(llama.model))
    chosen = attempts[len(errors)]
    gpu_layers = 0 if not supports else (n_layers if chosen < 0 else min(chosen, n_layers))
    device_bytes = report.device_bytes()
    if gpu_layers and report.buffers and not report.device_bytes(frozenset({"model"})):
        # llama.cpp falls back to host memory for weights a device buffer cannot take; then
        # nothing was offloaded whatever n_gpu_layers said, and the status line must not claim it.
        notes.append(f"llama.cpp kept all weights in host memory (asked for {gpu_layers} GPU layers)")
        gpu_layers = 0
    if errors:
        where = f"{gpu_layers} GPU layers" if gpu_layers else "the CPU"
        notes.append(f"loading with more GPU layers failed ({errors[-1]}); loaded on {where}")
    if not supports and request.gpu_layers not in ("auto", "none", 0):
        notes.append("this llama-cpp-python build cannot offload to a GPU; running on the CPU")
    if device is not None and gpu_layers:
        notes.append(
            f"{gpu_layers} of {n_layers} layers on {device.name} ({device.description}); "
            f"llama.cpp allocated {format_bytes(device_bytes)} there "
            f"({format_bytes(device.free_bytes)} were free)"
        )
    vocabulary = _vocabulary(llama_cpp, llama)
    weights_bytes = int(llama_cpp.llama_model_size(llama.model))
    rss_after, file_after = _rss_bytes()
    grown = rss_after - rss_before
    if grown > 0:
        mapped = max(file_after - file_before, 0)
        notes.append(
            f"resident after load: {format_bytes(grown)}, of which {format_bytes(mapped)} is the "
            f"memory-mapped model file ({format_bytes(weights_bytes)} of weights)"
        )
    return LoadedModel(
        llama=llama,
        lib=llama_cpp,
        vocabulary=vocabulary,
        n_layers=n_layers,
        gpu_layers=gpu_layers,
        device=device if gpu_layers else None,
        device_bytes=device_bytes,
        offload_failed=bool(errors),
        notes=tuple(notes),
        rollback=_choose_rollback(llama_cpp, llama, request),
        weights_bytes=weights_bytes,
        resident_bytes=grown if grown > 0 else weights_bytes,
        backends=loaded_backends,
    )


def choose_device(
    devices: list[offload.OffloadDevice], wanted: str, notes: list[str]
) -> tuple[offload.OffloadDevice | None, int]:
    """The GPU to offload to and its index among ``devices`` (llama.cpp's ``main_gpu``).

    ``wanted`` names one (Settings); empty, or a device no longer there (a note says so), means
    the one with the most free memory now.
    """
    if not devices:
        return None, 0
    if wanted:
        for index, candidate in enumerate(devices):
            if candidate.name == wanted:
                return candidate, index
        names = ", ".join(d.name for d in devices)
        notes.append(f"GPU {wanted} (Settings) not found; using the one with the most free memory ({names})")
    index = max(range(len(devices)), key=lambda i: devices[i].free_bytes)
    return devices[index], index


def _layers_that_fit(
    request: LoadRequest,
    device: offload.OffloadDevice | None,
    footprint: offload.ModelFootprint | None,
    notes: list[str],
) -> int | None:
    """For "auto": the layers whose weights, KV and recurrent state fit the device's free memory."""
    if device is None or footprint is None or request.gpu_layers != "auto":
        return None
    free = device.free_bytes
    if request.gpu_memory_limit is not None:
        free = min(free, request.gpu_memory_limit)
    fit = offload.layers_that_fit(footprint, request.n_ctx, free)
    if fit <= footprint.n_layers:
        whole = footprint.layers_bytes(footprint.n_layers, request.n_ctx)
        notes.append(
            f"auto: {fit} of {footprint.n_layers} layers fit in {format_bytes(free)} of {device.name} "
            f"(the whole model needs about {format_bytes(whole)} at n_ctx {request.n_ctx})"
        )
    return fit


def _vocabulary(lib: Any, llama: Any) -> Vocabulary:
    def special_id(text: str) -> int | None:
        ids = llama.tokenize(text.encode(), add_bos=False, special=True)
        return int(ids[0]) if len(ids) == 1 else None

    handle = lib.llama_model_get_vocab(llama.model)
    return Vocabulary(
        lib=lib,
        llama=llama,
        handle=handle,
        n_vocab=int(lib.llama_vocab_n_tokens(handle)),
        add_bos=bool(lib.llama_vocab_get_add_bos(handle)),
        bos=int(lib.llama_vocab_bos(handle)),
        im_end=special_id("<|im_end|>"),
        endoftext=special_id("<|endoftext|>"),
        think_end=special_id("</think>"),
    )


def _choose_rollback(lib: Any, llama: Any, request: LoadRequest) -> str:
    if not (lib.llama_model_is_hybrid(llama.model) or lib.llama_model_is_recurrent(llama.model)):
        return "truncate"
    if int(lib.llama_n_rs_seq(llama.ctx)) >= request.draft_max:
        return "snapshots"
    return "full-state" if request.rollback == "full-state" else "partial-state"


def _rss_bytes() -> tuple[int, int]:
    """(resident, file-backed resident) bytes of this process on Linux; zeros where unknown.

    The file-backed part is the memory-mapped GGUF: page cache the kernel can reclaim and
    re-read, unlike the anonymous part (KV cache, recurrent state, compute buffers, repacked
    weights).
    """
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 0, 0
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)

    def kib(name: str) -> int:
        try:
            return int(fields.get(name, "0 kB").split()[0]) * 1024
        except (ValueError, IndexError):
            return 0

    return kib("VmRSS"), kib("RssFile")


def _read_through(path: Path, progress: LoadProgress) -> None:
    """Read ``path`` once from start to end (into the OS page cache), reporting the fraction read."""
    try:
        size = path.stat().st_size
        buffer = bytearray(READ_BLOCK)
        done = 0
        with path.open("rb", buffering=0) as stream:
            while n := stream.readinto(buffer):
                done += n
                progress(done / size if size else 1.0)
    except OSError as exc:
        raise EngineError(f"could not read {path.name}: {exc.strerror or exc}") from exc


def describe_placement(model: LoadedModel, requested: GpuLayers) -> str:
    """Where the model runs, for the status bar, ``models list``, ``stats.engine`` and ``run.json``.

    ``local GPU (24 layers on Vulkan0: AMD Radeon 780M)``, or ``local CPU (haswell: AVX2; no GPU
    found)``: the CPU kernels in use and, in words, why no GPU is (the backend's own load error
    where it failed to load).
    """
    if model.gpu_layers and model.device is not None:
        fewer = "; more failed to load" if model.offload_failed else ""
        device = model.device
        return f"local GPU ({model.gpu_layers} layers on {device.name}: {device.description}{fewer})"
    if model.offload_failed:
        reason = "loading on the GPU failed"
    elif requested == "none" or requested == 0:
        reason = "GPU off in Settings"
    elif not model.backends.gpu:
        reason = model.backends.gpu_reason()
    else:
        reason = "no GPU found"
    return f"local CPU ({model.backends.cpu_label}; {reason})"
