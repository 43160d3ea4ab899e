"""The local engine's options as the settings store them: GPU layers and speculation.

A leaf: the settings (which every layer reads) and the llama.cpp engine both take these values as
stored, so they are defined once below both, and reading the settings never imports the engines.
"""

from __future__ import annotations

from typing import Literal

GpuLayersMode = Literal["auto", "all", "none"]
GpuLayers = int | GpuLayersMode
"""How much of a local model to offload to the GPU: a number of layers, "auto" (what fits the
device's free memory), "all", or "none" (the CPU only, the same as 0).  The settings store it and
the llama.cpp engine takes it as stored, so it has this one definition."""
Speculation = Literal["auto", "on", "off"]
"""Prompt-lookup speculative decoding in the local engine ("auto" stops drafting where it does
not pay on this computer); stored by the settings, taken by the llama.cpp engine."""
