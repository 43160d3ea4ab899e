"""``Runtime.warm_up``: what ``ask`` and ``eval run`` do before their first episode, so a second
launch restores the system turn from the state the first one saved instead of evaluating it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sqale_desktop.core.runtime import EngineFlags, choose, close_engine
from sqale_desktop.core.settings import Settings

pytestmark = pytest.mark.slow


def test_a_second_launch_restores_the_system_turn_the_first_saved(tiny_path: Path) -> None:
    runtime = choose(Settings(n_ctx=4096), EngineFlags(engine="llama", model=tiny_path))
    results = []
    for _launch in range(2):
        assert runtime.factory is not None
        engine = runtime.factory()
        try:
            results.append(runtime.warm_up(engine, threading.Event()))
        finally:
            close_engine(engine)
    first, second = results
    assert first is not None and second is not None
    assert first.completed and not first.restored and first.evaluated == first.tokens > 0
    assert second.completed and second.restored and second.evaluated == 0
    assert second.tokens == first.tokens


def test_engines_without_a_system_turn_to_warm_are_left_alone(tmp_path: Path) -> None:
    script = tmp_path / "replay.json"
    script.write_text('["{\\"tool\\": \\"list_tables\\"}"]', encoding="utf-8")
    runtime = choose(Settings(), EngineFlags(engine="replay", replay=script))
    assert runtime.factory is not None
    engine = runtime.factory()
    try:
        assert runtime.warm_up(engine, threading.Event()) is None
    finally:
        close_engine(engine)
