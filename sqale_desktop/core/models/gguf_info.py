"""What a GGUF file says about itself, and whether it is one of the SQaLe agents.

The agents are Qwen3.5-2B fine-tunes (``general.architecture`` ``qwen35``) whose chat template
opens a ``<think>`` block: the protocol (``core.agent.protocol``) asks the model to reason there
and then write JSON tool calls.  Another model (SmolLM2, a Llama, a plain chat model) was never
trained on that protocol and will most likely answer nothing, so the window warns before the
first question instead of letting the user wait for an empty episode.

The header is read by the bounded scanner (``core.gguf_header``): a fraction of a second for any
model, and any malformed header is a :class:`GgufUnreadable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sqale_desktop.core.gguf_header import GgufUnreadable as GgufUnreadable
from sqale_desktop.core.gguf_header import read_header
from sqale_desktop.core.models.catalog import CATALOG, find

SQALE_ARCHITECTURE = "qwen35"
THINK_TAG = "<think>"

Fitness = Literal["sqale", "qwen35", "foreign"]
"""``sqale``: a known SQaLe checkpoint; ``qwen35``: the right family and template but not known to be
one of the agents; ``foreign``: another architecture or no thinking template."""


@dataclass(frozen=True)
class GgufInfo:
    """The metadata that decides whether and how the app can use a model."""

    path: str
    architecture: str
    name: str
    tokenizer_model: str
    tokenizer_pre: str
    chat_template_has_think: bool
    context_length: int | None
    """``{arch}.context_length``: the context the model was trained for (None when absent)."""
    block_count: int | None


WANTED_SUFFIXES = (".context_length", ".block_count")
WANTED_KEYS = frozenset(
    {
        "general.architecture",
        "general.name",
        "tokenizer.ggml.model",
        "tokenizer.ggml.pre",
        "tokenizer.chat_template",
    }
)


def _wanted(key: str) -> bool:
    return key in WANTED_KEYS or key.endswith(WANTED_SUFFIXES)


def read_gguf_info(path: str | Path) -> GgufInfo:
    """Read the header of ``path``; raises :class:`GgufUnreadable` for files that are not GGUF."""
    meta = read_header(Path(path), _wanted).metadata
    architecture = str(meta.get("general.architecture") or "")
    template = meta.get("tokenizer.chat_template")

    def integer(key: str) -> int | None:
        value = meta.get(key)
        return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    return GgufInfo(
        path=str(path),
        architecture=architecture,
        name=str(meta.get("general.name") or ""),
        tokenizer_model=str(meta.get("tokenizer.ggml.model") or ""),
        tokenizer_pre=str(meta.get("tokenizer.ggml.pre") or ""),
        chat_template_has_think=isinstance(template, str) and THINK_TAG in template,
        context_length=integer(f"{architecture}.context_length"),
        block_count=integer(f"{architecture}.block_count"),
    )


def _known_checkpoint(name: str, source_checkpoint: str | None) -> bool:
    if source_checkpoint and find(source_checkpoint) is not None:
        return True
    lowered = name.casefold()
    return any(entry.repo_id.split("/")[-1].casefold() in lowered for entry in CATALOG)


def fitness(info: GgufInfo, source_checkpoint: str | None = None) -> Fitness:
    """How well the model fits the SQaLe protocol, from its metadata (and the registry's record of
    the checkpoint it was built from, when there is one)."""
    if info.architecture != SQALE_ARCHITECTURE or not info.chat_template_has_think:
        return "foreign"
    return "sqale" if _known_checkpoint(info.name, source_checkpoint) else "qwen35"


def fitness_warning(info: GgufInfo, source_checkpoint: str | None = None) -> str | None:
    """A sentence for the window when the model is not one of the SQaLe agents, else ``None``."""
    kind = fitness(info, source_checkpoint)
    label = info.name or Path(info.path).name
    if kind == "sqale":
        return None
    if kind == "qwen35":
        return (
            f"{label} is a Qwen3.5 model, but not one of the SQaLe agents the app knows "
            f"({', '.join(entry.name for entry in CATALOG)}). Unless it was trained on the same "
            "tool protocol it may not call the tools."
        )
    what = info.architecture or "unknown"
    template = (
        "a chat template with <think>" if info.chat_template_has_think else "no <think> in its chat template"
    )
    return (
        f"{label} is not one of the SQaLe agents (architecture {what}, {template}; the agents are "
        f"Qwen3.5-2B, architecture {SQALE_ARCHITECTURE}). It was not trained for this tool protocol "
        "and will most likely answer nothing. Tools → Model Manager… downloads a SQaLe agent."
    )


def context_warning(info: GgufInfo, n_ctx: int) -> str | None:
    """A sentence when the configured context is above what the model was trained for."""
    trained = info.context_length
    if trained is None or n_ctx <= trained:
        return None
    return (
        f"The context is set to {n_ctx:,} tokens, above the {trained:,} {info.name or 'this model'} "
        f"was trained for; the engine is given {trained:,} (Settings → Context sets it)."
    )


def effective_n_ctx(info: GgufInfo | None, n_ctx: int) -> int:
    """``n_ctx`` clamped to the training context: beyond it the model's attention was never trained,
    so answers degrade instead of getting better."""
    if info is None or info.context_length is None:
        return n_ctx
    return min(n_ctx, info.context_length)
