"""Runtimes over a test's own engine, for the window and its agent thread."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from sqale_desktop.core.engine_kinds import REPLAY
from sqale_desktop.core.runtime import Engine, ModelChoice, Runtime, resolve
from sqale_desktop.core.settings import Settings


def scripted(factory: Callable[[], Engine], settings: Settings | None = None) -> Runtime:
    """What ``core.runtime.resolve`` makes of ``settings`` (default: the defaults), with ``factory``
    as its engine: the settings' prompt, sampling, limits and tool databases, a scripted model."""
    runtime = resolve(settings or Settings(), ModelChoice(REPLAY))
    return dataclasses.replace(runtime, factory=factory)
