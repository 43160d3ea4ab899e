"""The per-turn tool budget is the user's setting, handed to the episode loop the runtime builds."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from sqale_desktop.core.agent import loop
from sqale_desktop.core.runtime import episode_fn
from sqale_desktop.core.settings import Settings


def test_the_episode_gets_the_settings_tool_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_run_episode(*args: Any, **kwargs: Any) -> Iterator[Any]:
        seen.update(kwargs)
        yield from ()

    monkeypatch.setattr(loop, "run_episode", fake_run_episode)
    run = episode_fn(dataclasses.replace(Settings(), turn_tool_time_s=75.0))
    assert list(run(object(), object(), "q?", threading.Event())) == []  # type: ignore[arg-type]
    assert seen["turn_tool_seconds"] == 75.0
