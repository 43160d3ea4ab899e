"""Whether the installed llama.cpp build can offload layers to a GPU.

Only reports: the engine (``loading``) decides the layer count and falls back to the CPU when
loading with offload fails.  The faces (``models list``, the Settings dialog) reach these through
``core.runtime``.  ``llama_cpp`` is imported lazily because loading its shared library takes time
and the CLI must start without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqale_desktop.core.engines.llama.backends import Backends

INSTALL_HINT = (
    "This llama.cpp build runs on the CPU only. For a GPU, reinstall llama-cpp-python with "
    'CMAKE_ARGS="-DGGML_CUDA=on" (NVIDIA), "-DGGML_METAL=on" (Apple) or "-DGGML_VULKAN=on" '
    "(see the README)."
)


@dataclass(frozen=True)
class GpuOffload:
    """What the UI shows next to the GPU-layers setting."""

    supported: bool
    message: str
    devices: tuple[str, ...] = ()
    """One label per device llama.cpp can offload to (name, description, free memory)."""
    backends: str = ""
    """The CPU variant and GPU backends loaded (``CPU haswell: AVX2 …; GPU backends: Vulkan``)."""


def gpu_offload() -> GpuOffload:
    """Ask the llama.cpp build (``llama_supports_gpu_offload``) whether it can offload."""
    try:
        import llama_cpp
    except (ImportError, OSError) as exc:
        return GpuOffload(False, f"llama-cpp-python could not be loaded ({type(exc).__name__}: {exc}).")
    from sqale_desktop.core.engines.llama.backends import load_backends

    try:
        loaded = load_backends()
    except OSError as exc:
        return GpuOffload(False, f"llama.cpp's backends could not be loaded ({exc}).")
    backends = describe_backends(loaded)
    try:
        supported = bool(llama_cpp.llama_supports_gpu_offload())
    except (AttributeError, OSError) as exc:
        return GpuOffload(False, f"This llama-cpp-python cannot report GPU support ({exc}).")
    if not supported:
        if loaded.dynamic and loaded.gpu:
            message = (
                f"The {', '.join(loaded.gpu)} backend is loaded but finds no GPU on this computer (check "
                "the driver; for Vulkan, `vulkaninfo --summary` lists the devices); running on the CPU."
            )
            return GpuOffload(False, message, (), backends)
        why = loaded.gpu_reason() if loaded.dynamic else ""
        if why and why != "no GPU backend in this build":
            message = f"No GPU backend could be loaded ({why}); running on the CPU."
            return GpuOffload(False, message, (), backends)
        return GpuOffload(False, INSTALL_HINT, (), backends)
    from sqale_desktop.core.engines.llama.offload import offload_devices

    devices = offload_devices()
    if devices is None:
        return GpuOffload(True, "This llama.cpp build can offload layers to the GPU.", (), backends)
    if not devices:
        return GpuOffload(
            False,
            "This llama.cpp build can offload, but it finds no GPU on this computer (check the driver; "
            "for Vulkan, `vulkaninfo --summary` lists the devices).",
            (),
            backends,
        )
    labels = tuple(device.label() for device in devices)
    return GpuOffload(
        True, "This llama.cpp build can offload layers to " + "; ".join(labels) + ".", labels, backends
    )


def describe_backends(loaded: Backends) -> str:
    """``CPU haswell: AVX2 (this CPU runs x64, sse42, sandybridge, haswell); GPU backends: Vulkan``."""
    if not loaded.dynamic:
        gpu_part = "GPU backend linked in" if loaded.gpu else "no GPU backend"
        return f"CPU: the build's own CPU backend; {gpu_part}"
    runs = ", ".join(loaded.runnable_variants())
    cpu = f"CPU {loaded.cpu_label} (this CPU runs {runs})" if loaded.cpu_variant else "no CPU variant runs"
    gpu = ", ".join(loaded.gpu) if loaded.gpu else f"none ({loaded.gpu_reason()})"
    return f"{cpu}; GPU backends: {gpu}"


def gpu_offload_supported() -> bool:
    """Shorthand for ``gpu_offload().supported``."""
    return gpu_offload().supported


def known_gpus() -> list[tuple[str, str]]:
    """(name, label) of each GPU llama.cpp found, once its backends are loaded (by the model's load,
    on the model worker); never loads them itself, since that opens GPU drivers (the Settings
    dialog asks on the UI thread)."""
    from sqale_desktop.core.engines.llama import backends

    if backends.loaded() is None:
        return []
    from sqale_desktop.core.engines.llama.offload import offload_devices

    return [(device.name, device.label()) for device in offload_devices() or []]
