"""Known conditions of a conversion, each with a message fit to show the user."""

from __future__ import annotations

from sqale_desktop.core.models.errors import ModelError


class ConversionError(ModelError):
    """A conversion could not finish; nothing was registered and no partial file was left."""


class UnsupportedCheckpoint(ConversionError):
    """The folder is not a Qwen3.5 safetensors checkpoint this converter understands."""


class ConversionCancelled(ConversionError):
    """The user cancelled; everything written so far was removed."""


class QuantizationFailed(ConversionError):
    """llama.cpp's quantizer returned an error."""


class VerificationFailed(ConversionError):
    """The finished GGUF did not load or did not generate."""
