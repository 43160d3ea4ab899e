"""Which GPU the model goes to when llama.cpp finds several (``loading.choose_device``)."""

from __future__ import annotations

from sqale_desktop.core.engines.llama.loading import choose_device
from sqale_desktop.core.engines.llama.offload import OffloadDevice

GIB = 1024**3
IGPU = OffloadDevice("Vulkan0", "AMD Radeon 780M", "igpu", 2 * GIB, 4 * GIB)
CARD = OffloadDevice("Vulkan1", "NVIDIA GeForce RTX 4060", "gpu", 7 * GIB, 8 * GIB)


def test_the_default_is_the_device_with_the_most_free_memory() -> None:
    notes: list[str] = []
    assert choose_device([IGPU, CARD], "", notes) == (CARD, 1)
    assert notes == []


def test_the_device_named_in_settings_wins() -> None:
    notes: list[str] = []
    assert choose_device([IGPU, CARD], "Vulkan0", notes) == (IGPU, 0)
    assert notes == []


def test_a_named_device_that_is_gone_falls_back_and_says_so() -> None:
    notes: list[str] = []
    assert choose_device([IGPU, CARD], "CUDA0", notes) == (CARD, 1)
    assert notes == [
        "GPU CUDA0 (Settings) not found; using the one with the most free memory (Vulkan0, Vulkan1)"
    ]


def test_no_device_means_the_cpu() -> None:
    assert choose_device([], "Vulkan1", []) == (None, 0)
