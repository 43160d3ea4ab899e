"""Convert a published Qwen3.5 safetensors checkpoint to a quantized GGUF on the user's machine.

Pure numpy + safetensors + gguf (no torch): ``convert_model`` is the entry point; the modules
underneath each do one step (read, plan, write, quantize, verify).
"""

from sqale_desktop.core.models.convert.errors import (
    ConversionCancelled,
    ConversionError,
    QuantizationFailed,
    UnsupportedCheckpoint,
    VerificationFailed,
)
from sqale_desktop.core.models.convert.pipeline import (
    ConversionResult,
    ConvertOptions,
    ConvertProgress,
    convert_model,
)
from sqale_desktop.core.models.convert.quantize import DEFAULT_QUANT, QUANT_TYPES

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
