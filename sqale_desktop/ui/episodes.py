"""How the agent thread runs an episode: the core's loop over the core's tools.

Kept apart from the worker so that tests and benchmarks can hand the worker another function
(the worker only needs "engine, database, question, cancel flag -> events").
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqale_desktop.core.agent.events import Event
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.db.connection import ReadOnlyDatabase, open_readonly
from sqale_desktop.core.engines.base import Engine
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.agent_runner import EpisodeFn


def open_tool_database(path: Path, time_limit_s: float) -> ReadOnlyDatabase:
    """The agent's own handle on a database, opened on the agent thread."""
    return open_readonly(path, time_limit_s=time_limit_s)


def default_episode_fn(settings: Settings, protocol: Any = None) -> EpisodeFn:
    """The real episode: ``core.agent.loop.run_episode`` with a ``ToolBox`` over the database.

    ``protocol`` is the model's ``AgentProtocol`` (prompt strings from its ``sqale_agent.py``);
    ``None`` uses the built-in one, or the engine's own when it carries one.
    """
    from sqale_desktop.core.agent.loop import run_episode
    from sqale_desktop.core.tools import ToolBox

    def run(engine: Engine, db: Any, question: str, cancel: threading.Event) -> Iterator[Event]:
        toolbox = ToolBox(db)  # the model sees as many rows as in training; settings cap the answer
        chosen = protocol if protocol is not None else getattr(engine, "protocol", None)
        chosen = fit_protocol(chosen, getattr(engine, "n_ctx", None))
        yield from run_episode(
            question, db, toolbox, engine, chosen, cancel=cancel, result_rows=settings.max_rows
        )

    return run


def fit_protocol(protocol: AgentProtocol | None, n_ctx: object) -> AgentProtocol | None:
    """The protocol's budgets within the engine's context (clamped to the model's training context).

    The episode keeps the protocol's proportion (12,288 of 16,384 tokens: three quarters for the
    episode, the rest for the final answer), so a smaller context still ends in a final turn
    instead of an overflow.
    """
    if not isinstance(n_ctx, int) or n_ctx <= 0:
        return protocol
    base = protocol if protocol is not None else AgentProtocol()
    if n_ctx >= base.context_tokens:
        return protocol
    return dataclasses.replace(
        base, context_tokens=n_ctx, episode_tokens=min(base.episode_tokens, n_ctx * 3 // 4)
    )


RECORDING = "demo_recording.json"


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
