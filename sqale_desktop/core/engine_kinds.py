"""What each kind of engine means, written once: the settings, the settings dialog, the window,
``core.runtime`` and the evaluation read these facts instead of comparing kind names.

A leaf of ``core`` (it imports nothing of the package), so that the settings can name their
engines from it and ``core.runtime``, which builds the engines (its ``ENGINES`` table of
builders), can describe them from it.  Adding a kind is one entry here and one builder there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

EngineKind = Literal["llama", "openai", "replay", "recording"]
"""Every engine the runtime can build."""

LLAMA: Final = "llama"
"""The local model: a GGUF file run by llama.cpp in this process."""
SERVER: Final = "openai"
"""An OpenAI-compatible server, reached at the settings' (or a command's) URL."""
REPLAY: Final = "replay"
"""Scripted completions read from a file (tests, the evaluation's self-check)."""
RECORDING: Final = "recording"
"""The recorded demo episode the window plays before a model is installed."""


@dataclass(frozen=True)
class Kind:
    """The facts of one engine kind.

    ``server``: it runs elsewhere, reached over HTTP (its hardware settings mean nothing here);
    ``needs_url``: it talks to a server URL (the settings' or ``--base-url``); ``model_file``: it
    loads a GGUF file (the model registry, the context clamped to the model's training);
    ``per_question``: an evaluation builds one engine per question (a script each);
    ``recording``: it plays the recorded demo episode (the chat badges it, the status says so);
    ``in_settings``: the settings may name it; ``offered``: the settings dialog lists it;
    ``command``: ``ask --engine`` and ``eval run --engine`` accept it.
    """

    name: EngineKind
    label: str
    server: bool = False
    needs_url: bool = False
    model_file: bool = False
    per_question: bool = False
    recording: bool = False
    in_settings: bool = False
    offered: bool = False
    command: bool = False


KINDS: dict[EngineKind, Kind] = {
    LLAMA: Kind(
        LLAMA,
        "Local model (llama.cpp, in this app)",
        model_file=True,
        in_settings=True,
        offered=True,
        command=True,
    ),
    SERVER: Kind(
        SERVER,
        "OpenAI-compatible server",
        server=True,
        needs_url=True,
        in_settings=True,
        offered=True,
        command=True,
    ),
    REPLAY: Kind(REPLAY, "Replayed completions", per_question=True, in_settings=True, command=True),
    RECORDING: Kind(RECORDING, "Recorded demo episode", recording=True),
}
"""The one table of engine kinds, in the order the settings dialog and ``--engine`` list them."""

SETTINGS_ENGINES: tuple[EngineKind, ...] = tuple(k for k, kind in KINDS.items() if kind.in_settings)
"""The kinds a settings file may name."""
COMMAND_ENGINES: tuple[EngineKind, ...] = tuple(k for k, kind in KINDS.items() if kind.command)
"""The kinds ``ask --engine`` and ``eval run --engine`` accept."""


def kind_of(name: str) -> Kind | None:
    """The facts of the kind called ``name``; ``None`` for a name that is no kind."""
    for key, kind in KINDS.items():
        if key == name:
            return kind
    return None
