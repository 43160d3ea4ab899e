"""Whether the installed llama.cpp build can offload layers to a GPU.

Only reports: the engine (``core/engines/llama/loading.py``) decides the layer count and
falls back to the CPU when loading with offload fails.  ``llama_cpp`` is imported lazily because
loading its shared library takes time and the CLI must start without it.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def gpu_offload() -> GpuOffload:
    """Ask the llama.cpp build (``llama_supports_gpu_offload``) whether it can offload."""
    try:
        import llama_cpp
    except (ImportError, OSError) as exc:
        return GpuOffload(False, f"llama-cpp-python could not be loaded ({type(exc).__name__}: {exc}).")
    try:
        supported = bool(llama_cpp.llama_supports_gpu_offload())
    except (AttributeError, OSError) as exc:
        return GpuOffload(False, f"This llama-cpp-python cannot report GPU support ({exc}).")
    if not supported:
        return GpuOffload(False, INSTALL_HINT)
    from sqale_desktop.core.engines.offload import offload_devices

    devices = offload_devices()
    if devices is None:
        return GpuOffload(True, "This llama.cpp build can offload layers to the GPU.")
    if not devices:
        return GpuOffload(
            False,
            "This llama.cpp build can offload, but it finds no GPU on this computer (check the driver; "
            "for Vulkan, `vulkaninfo --summary` lists the devices).",
        )
    labels = tuple(device.label() for device in devices)
    return GpuOffload(True, "This llama.cpp build can offload layers to " + "; ".join(labels) + ".", labels)


def gpu_offload_supported() -> bool:
    """Shorthand for ``gpu_offload().supported``."""
    return gpu_offload().supported
