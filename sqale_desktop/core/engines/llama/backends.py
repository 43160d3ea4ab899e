"""ggml's dynamic backends: which CPU kernels and which GPU backend this process runs on, and why.

The app's llama.cpp build (``GGML_BACKEND_DL``, see the Makefile and
``packaging/llama_cpp_backends.py``) ships every backend as its own library beside ``libggml``:
``libggml-cpu-<level>.so`` once per x86 micro-architecture level, ``libggml-vulkan.so``, and
``libggml-cuda.so`` where it was built.  Nothing is registered until someone loads them, and
llama-cpp-python does not (abetlen/llama-cpp-python#2069: ``Llama()`` then fails with "no
backends are loaded"), so :func:`load_backends` must run before the first model loads; the
engine's loader calls it, and so does every other place that builds a ``llama_cpp.Llama``.

Why not ggml's own ``ggml_backend_load_all_from_path``: it loads silently in release builds, so a
Vulkan backend whose loader or driver is missing disappears without a reason, and it cannot be
told which CPU variant to take.  This module does the same steps through ggml's public
``ggml_backend_load`` and says what happened at each:

- **CPU**: every shipped variant's ``ggml_backend_score()`` (0 where this CPU or OS lacks an
  instruction set it needs; ggml checks CPUID and the OS's saved state) and the highest wins, as
  in ggml.  ``SQALE_DESKTOP_CPU_VARIANT`` forces one (tests, benchmarks, a user working around a
  bad kernel); a variant this CPU cannot run is refused with a note, never loaded.  The AMX
  variant that crashed here is not built at all (``packaging/llama_cpp_backends.py``).
- **GPU**: each GPU backend library is loaded first in a child process (:mod:`.gpu_probe`): a
  driver that crashes or hangs there is not loaded here, the CPU runs and the status line says
  why; the verdict is remembered until the loader or a driver changes.  Then it is opened with
  ``ctypes`` so that a missing Vulkan loader or a broken driver gives its own error text
  (``libvulkan.so.1: cannot open shared object file``) for the status line; then ggml registers
  it.  Devices come from ggml's registry
  (``core/engines/llama/offload.py``); Mesa's CPU-type Vulkan device (lavapipe) is skipped by ggml itself
  unless ``GGML_VK_VISIBLE_DEVICES`` names it.

A build with one ``libggml-cpu.so`` linked in (``make run CMAKE_ARGS=-DGGML_NATIVE=OFF``, or a
``LLAMA_CPP_LIB_PATH`` pointing at one) has nothing to load: :func:`load_backends` says so and
returns.  Loading happens once per process (ggml's registry is process-wide); Qt-free.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from sqale_desktop.core.engines.llama import gpu_probe, native_log
from sqale_desktop.core.engines.llama.ggml_library import ggml_library

CPU_VARIANT_ENV = "SQALE_DESKTOP_CPU_VARIANT"

# What each shipped variant adds, for the status line (ggml's list in ggml/src/CMakeLists.txt).
VARIANT_FEATURES = {
    "x64": "x86-64 baseline",
    "sse42": "SSE4.2",
    "sandybridge": "AVX",
    "ivybridge": "AVX, F16C",
    "piledriver": "AVX, FMA",
    "haswell": "AVX2",
    "skylakex": "AVX-512",
    "cannonlake": "AVX-512 VBMI",
    "cascadelake": "AVX-512 VNNI",
    "icelake": "AVX-512 VBMI, VNNI",
    "cooperlake": "AVX-512 BF16",
    "zen4": "AVX-512 BF16, VBMI, VNNI",
    "alderlake": "AVX-VNNI",
    "sapphirerapids": "AMX",
}
# GPU backends ggml can build as libraries, in the order ggml's own loader tries them.
GPU_BACKENDS = ("cuda", "hip", "metal", "sycl", "vulkan", "opencl", "musa")
_DISPLAY = {"cuda": "CUDA", "hip": "HIP", "metal": "Metal", "sycl": "SYCL", "vulkan": "Vulkan",
            "opencl": "OpenCL", "musa": "MUSA"}  # fmt: skip


@dataclass(frozen=True)
class Backends:
    """What :func:`load_backends` found and loaded; the same object for the whole process."""

    folder: Path
    dynamic: bool
    """A ``GGML_BACKEND_DL`` build (backends loaded here), not one with the CPU backend linked in."""
    cpu_variant: str | None
    """The CPU variant running (``haswell``); None for a linked-in CPU backend."""
    cpu_variants: tuple[tuple[str, int], ...]
    """Every shipped variant with its score on this CPU (0: cannot run here)."""
    gpu: tuple[str, ...]
    """GPU backends registered (``Vulkan``); whether they found a device is ``offload``'s question."""
    notes: tuple[str, ...]
    """Why a backend or a forced variant was not used, in words."""

    @property
    def cpu_label(self) -> str:
        """``haswell: AVX2`` (or ``portable build`` for a linked-in CPU backend)."""
        if self.cpu_variant is None:
            return "single CPU build"
        features = VARIANT_FEATURES.get(self.cpu_variant)
        return f"{self.cpu_variant}: {features}" if features else self.cpu_variant

    def runnable_variants(self) -> list[str]:
        """Shipped variants this CPU can run, lowest level first."""
        return [name for name, score in self.cpu_variants if score > 0]

    def key(self) -> str:
        """What a saved model state depends on: the kernels that computed it."""
        return f"cpu={self.cpu_variant or 'linked'};gpu={','.join(self.gpu) or 'none'}"

    def gpu_reason(self) -> str:
        """Why no GPU backend is registered (``no GPU backend in this build``), or ``""``."""
        if self.gpu:
            return ""
        gpu_notes = [n for n in self.notes if n.split(":", 1)[0] in _DISPLAY.values()]
        return gpu_notes[0] if gpu_notes else "no GPU backend in this build"


_lock = threading.Lock()
_loaded: Backends | None = None


def library_folder() -> Path:
    """Where ``llama_cpp`` loads its shared libraries from (its ``lib/``, or LLAMA_CPP_LIB_PATH)."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        return Path(override)
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise ImportError("llama_cpp is not installed")
    return Path(spec.origin).parent / "lib"


def _suffix() -> str:
    return {"win32": ".dll", "darwin": ".so"}.get(sys.platform, ".so")


def _prefix() -> str:
    return "" if sys.platform == "win32" else "lib"


def variant_files(folder: Path) -> dict[str, Path]:
    """The CPU variant libraries in ``folder``: ``{"haswell": .../libggml-cpu-haswell.so}``."""
    pattern = re.compile(re.escape(f"{_prefix()}ggml-cpu-") + r"(.+)" + re.escape(_suffix()) + "$")
    found = {}
    for path in sorted(folder.glob(f"{_prefix()}ggml-cpu-*{_suffix()}")):
        match = pattern.match(path.name)
        if match:
            found[match.group(1)] = path
    return found


def _score(path: Path) -> tuple[int, str]:
    """The variant's own ``ggml_backend_score()`` on this CPU; (0, reason) when it will not open.

    Opening a variant runs none of its kernels (ggml's loader opens them all the same way).
    """
    try:
        library = ctypes.CDLL(str(path))
        score = library.ggml_backend_score
    except (OSError, AttributeError) as exc:
        return 0, str(exc)
    score.restype = ctypes.c_int
    score.argtypes = []
    return int(score()), ""


def _choose_variant(scores: dict[str, int], notes: list[str]) -> str | None:
    """The best-scoring variant, or the forced one where this CPU can run it."""
    forced = os.environ.get(CPU_VARIANT_ENV, "").strip()
    runnable = {name: score for name, score in scores.items() if score > 0}
    if forced:
        if runnable.get(forced):
            return forced
        why = "this CPU cannot run it" if forced in scores else "this build has no such variant"
        notes.append(f"CPU variant {forced!r} ({CPU_VARIANT_ENV}) not used: {why}")
    if not runnable:
        return None
    return max(runnable, key=lambda name: runnable[name])


def load_backends() -> Backends:
    """Register the best CPU variant and every GPU backend that loads; once per process.

    Raises ``ImportError``/``OSError`` only where ``llama_cpp`` itself cannot load.
    """
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        folder = library_folder()
        ggml = ggml_library(folder)
        native_log.install()  # ggml's "loaded ... backend" lines go to the app's log, not stderr
        variants = variant_files(folder)
        if not variants:
            # The CPU backend is linked into libggml: nothing to load, and no GPU libraries either.
            _loaded = Backends(folder, False, None, (), _linked_gpu(), ())
            return _loaded
        notes: list[str] = []
        scores: dict[str, int] = {}
        for name, path in variants.items():
            scores[name], why = _score(path)
            if why:
                notes.append(f"CPU variant {name}: {why}")
        gpu: list[str] = []
        for backend in GPU_BACKENDS:
            path = folder / f"{_prefix()}ggml-{backend}{_suffix()}"
            if not path.exists():
                continue
            display = _DISPLAY[backend]
            # Loaded in a child first: a driver that crashes or hangs there is not loaded here.
            refused = gpu_probe.verdict(display, path)
            if refused:
                notes.append(refused)
                continue
            try:
                ctypes.CDLL(str(path))  # for dlopen's own words when the loader or driver is missing
            except OSError as exc:
                notes.append(f"{display}: {_short(str(exc), folder)}")
                continue
            if ggml.ggml_backend_load(str(path).encode()):
                gpu.append(display)
            else:
                notes.append(f"{display}: the backend did not initialise (no usable driver)")
        chosen = _choose_variant(scores, notes)
        if chosen is not None and not ggml.ggml_backend_load(str(variants[chosen]).encode()):
            notes.append(f"CPU variant {chosen}: ggml could not register it")
            chosen = None
        if chosen is None:
            notes.append("no CPU variant of this build runs on this CPU")
        ordered = tuple(
            sorted(
                scores.items(),
                key=lambda item: (
                    list(VARIANT_FEATURES).index(item[0])
                    if item[0] in VARIANT_FEATURES
                    else len(VARIANT_FEATURES)
                ),
            )
        )
        _loaded = Backends(folder, True, chosen, ordered, tuple(gpu), tuple(notes))
        return _loaded


def loaded() -> Backends | None:
    """What :func:`load_backends` found, without loading anything."""
    return _loaded


def _linked_gpu() -> tuple[str, ...]:
    """GPU support compiled into a single-library build (``llama_supports_gpu_offload``)."""
    try:
        import llama_cpp

        return ("linked GPU backend",) if llama_cpp.llama_supports_gpu_offload() else ()
    except (ImportError, OSError, AttributeError):
        return ()


def _short(message: str, folder: Path) -> str:
    """dlopen's message without the app's own folder (it varies per install)."""
    return message.replace(f"{folder}{os.sep}", "")
