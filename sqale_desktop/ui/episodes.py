"""How the agent thread runs an episode: the core's loop over the core's tools.

Kept apart from the worker so that tests and benchmarks can hand the worker another function
(the worker only needs "engine, database, question, cancel flag -> events").
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqale_desktop.core.agent.events import Event
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
        yield from run_episode(
            question, db, toolbox, engine, chosen, cancel=cancel, result_rows=settings.max_rows
        )

    return run
