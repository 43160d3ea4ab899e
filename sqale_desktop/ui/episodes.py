"""The recorded demo episode the chat offers before a model is installed ("Watch a recorded answer").

How a live question becomes an episode (engine, protocol, episode function) is decided in
``core.runtime``, for the window and the CLI alike, and so is how the recording is played (its
"recording" engine); this module only reads the recording.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sqale_desktop.core import runtime

RECORDING = "demo_recording.json"
# What a played recording's episode names as its engine (``stats.engine``): the history keeps the
# recording with the conversation, and this is how a restored one is known for a recording.  The
# runtime's recording engine says it, so it is defined there.
RECORDED_ENGINE = runtime.RECORDED_ENGINE


@dataclass(frozen=True)
class Recording:
    """A recorded episode for the demo database: the question and the model's completions."""

    question: str
    sql: str
    completions: list[str]


def recording_path() -> Path:
    return Path(__file__).resolve().parent.parent / "resources" / RECORDING


def load_recording(path: Path | None = None) -> Recording:
    """Read the recorded demo episode (raises ``OSError`` or ``ValueError`` with the reason)."""
    data = json.loads((path or recording_path()).read_text(encoding="utf-8"))
    completions = data.get("completions") if isinstance(data, dict) else None
    if not isinstance(completions, list) or not all(isinstance(c, str) for c in completions):
        raise ValueError("the recording has no list of completions")
    return Recording(str(data.get("question", "")), str(data.get("sql", "")), list(completions))
