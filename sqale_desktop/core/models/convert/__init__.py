"""Convert a published Qwen3.5 safetensors checkpoint to a quantized GGUF on the user's machine.

Pure numpy + safetensors + gguf (no torch): ``convert_model`` is the entry point; the modules
underneath each do one step (read, plan, write, quantize, verify).

The pipeline's names are loaded on first use (PEP 562): the CLI registers ``models convert``
with :data:`QUANT_TYPES` on every call, and importing the pipeline would pull numpy and gguf
into ``sqale-desktop query`` and ``tool`` too (tests/commands/test_lazy_imports.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqale_desktop.core.models.convert.errors import (
    ConversionCancelled,
    ConversionError,
    QuantizationFailed,
    UnsupportedCheckpoint,
    VerificationFailed,
)
from sqale_desktop.core.models.convert.quantize import DEFAULT_QUANT, QUANT_TYPES

if TYPE_CHECKING:
    from sqale_desktop.core.models.convert.pipeline import (
        ConversionResult,
        ConvertOptions,
        ConvertProgress,
        convert_model,
    )

_PIPELINE_NAMES = frozenset({"ConversionResult", "ConvertOptions", "ConvertProgress", "convert_model"})

__all__ = [
    "DEFAULT_QUANT",
    "QUANT_TYPES",
    "ConversionCancelled",
    "ConversionError",
    "ConversionResult",
    "ConvertOptions",
    "ConvertProgress",
    "QuantizationFailed",
    "UnsupportedCheckpoint",
    "VerificationFailed",
    "convert_model",
]


def __getattr__(name: str) -> Any:
    if name in _PIPELINE_NAMES:
        from sqale_desktop.core.models.convert import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
