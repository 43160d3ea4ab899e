"""The agent thread warms the system turn right after loading; a question asked meanwhile waits for it.

A replay engine with a ``warm_up`` that holds until released shows the order (load, "Preparing the
model…", the warm-up, then the queued question) without timing; the real tiny qwen35 model through
the runtime the app resolves shows the turn warmed and saved where the next launch finds it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqale_desktop.core.agent.events import EpisodeEnded, EpisodeStarted
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.engines.base import WarmUp
from sqale_desktop.core.engines.replay import ReplayEngine, ReplaySession
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.agent_runner import AgentRunner, EpisodeDone, EventItem
from tests.ui.replay_scripts import CHINOOK_ANSWER_SQL, chinook_script
from tests.ui.runtimes import scripted

PROMPT = AgentProtocol().prompt_head("")


class WarmingEngine(ReplayEngine):
    """A replay engine whose warm-up blocks until the test releases it (or it is cancelled)."""

    def __init__(self, script: list[str]) -> None:
        super().__init__(script)
        self.release = threading.Event()
        self.warming = threading.Event()
        self.log: list[str] = []
        self.cancelled = False

    def warm_up(self, prompt: str, cancel: threading.Event) -> WarmUp:
        self.log.append(f"warm:{prompt}")
        self.warming.set()
        while not self.release.wait(0.01):
            if cancel.is_set():
                self.cancelled = True
                return WarmUp(1, False)
        return WarmUp(1, True, evaluated=1)

    def new_session(self, prompt: str) -> ReplaySession:
        self.log.append("episode")
        return super().new_session(prompt)


def test_a_question_asked_during_the_warm_up_is_answered_after_it(qtbot: Any, chinook: Path) -> None:
    engine = WarmingEngine(chinook_script(thinking_words=9))
    runner = AgentRunner(scripted(lambda: engine))
    states: list[tuple[str, str]] = []
    runner.engine_state.connect(lambda state, text: states.append((state, text)))
    items: list[Any] = []
    try:
        runner.load_engine()
        qtbot.waitUntil(engine.warming.is_set, timeout=10_000)
        runner.ask("Which artists have the most albums?", chinook)  # queues behind the warm-up
        qtbot.waitUntil(lambda: ("loading", "Preparing the model…") in states, timeout=10_000)
        assert engine.log == [f"warm:{PROMPT}"]  # the question has not started
        assert not any(s == "ready" for s, _ in states)
        engine.release.set()

        def done() -> bool:
            items.extend(runner.drain())
            return any(isinstance(i, EpisodeDone) for i in items)

        qtbot.waitUntil(done, timeout=30_000)
    finally:
        assert runner.shutdown()
    assert engine.log == [f"warm:{PROMPT}", "episode"]
    assert [s for s, _ in states] == ["loading", "loading", "ready"]
    events = [i.event for i in items if isinstance(i, EventItem)]
    assert any(isinstance(e, EpisodeStarted) for e in events)
    [ended] = [e for e in events if isinstance(e, EpisodeEnded)]
    assert ended.episode.ended_by == "submit_sql" and ended.episode.sql == CHINOOK_ANSWER_SQL


def test_shutdown_cancels_a_warm_up_under_way(qtbot: Any) -> None:
    engine = WarmingEngine([])
    runner = AgentRunner(scripted(lambda: engine))
    runner.load_engine()
    qtbot.waitUntil(engine.warming.is_set, timeout=10_000)
    assert runner.shutdown(timeout_ms=5_000)
    assert engine.cancelled


def test_an_engine_without_a_warm_up_is_only_loaded(qtbot: Any) -> None:
    runner = AgentRunner(scripted(lambda: ReplayEngine([])))
    states: list[str] = []
    runner.engine_state.connect(lambda state, _text: states.append(state))
    try:
        with qtbot.waitSignal(
            runner.engine_state, timeout=10_000, check_params_cb=lambda s, _t: s == "ready"
        ):
            runner.load_engine()
    finally:
        assert runner.shutdown()
    assert states == ["loading", "ready"]  # no "Preparing the model…"


def test_a_kept_engine_is_not_warmed_again_and_a_new_one_is(qtbot: Any, chinook: Path) -> None:
    """``set_runtime``: ``keep_engine`` keeps the loaded, warmed engine as it is (the next episode
    runs on it); a change that concerns the engine drops it, and the next load warms the new one."""
    engines: list[WarmingEngine] = []

    def factory() -> WarmingEngine:
        engines.append(WarmingEngine(chinook_script(thinking_words=9)))
        engines[-1].release.set()
        return engines[-1]

    def load() -> None:
        with qtbot.waitSignal(
            runner.engine_state, timeout=10_000, check_params_cb=lambda s, _t: s == "ready"
        ):
            runner.load_engine()

    runner = AgentRunner(scripted(factory))
    items: list[Any] = []
    try:
        load()
        runner.set_runtime(runner.runtime.retune(Settings(temperature=0.1)), keep_engine=True)
        runner.ask("Which artists have the most albums?", chinook)
        qtbot.waitUntil(
            lambda: items.extend(runner.drain()) or any(isinstance(i, EpisodeDone) for i in items),
            timeout=30_000,
        )
        runner.set_runtime(scripted(factory, Settings(n_ctx=8192)))
        load()
    finally:
        assert runner.shutdown()
    assert [engine.log for engine in engines] == [[f"warm:{PROMPT}", "episode"], [f"warm:{PROMPT}"]]


def test_the_app_warms_the_protocols_system_turn_of_the_real_model(qtbot: Any, tmp_path: Path) -> None:
    """``ui.app``'s engine choice, as at launch: load, warm the built-in system turn, save it."""
    from sqale_desktop.core.engines.llama.prefix_store import PrefixStore
    from sqale_desktop.core.engines.synthetic_gguf import TINY_SHAPE, write_qwen35_gguf
    from sqale_desktop.core.models.registry import Registry
    from sqale_desktop.core.runtime import resolve

    record = Registry().import_file(write_qwen35_gguf(tmp_path / "tiny-qwen35.gguf", TINY_SHAPE, seed=3))
    settings = Settings(model_id=record.id, n_ctx=4096, n_threads=1, gpu_layers="none")
    for launch in ("first", "second"):
        runner = AgentRunner(resolve(settings))  # what the app's window starts with
        try:
            with qtbot.waitSignal(
                runner.engine_state, timeout=60_000, check_params_cb=lambda s, _t: s == "ready"
            ):
                runner.load_engine()
            engine = runner.worker.engine
            assert engine is not None
            notes = " ".join(getattr(engine, "notes", []))
            assert ("restored from the saved state" in notes) == (launch == "second"), notes
        finally:
            assert runner.shutdown()
        assert len(PrefixStore().entries()) == 1
