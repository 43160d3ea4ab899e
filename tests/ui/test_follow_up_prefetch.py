"""Clicking Follow up has the model start on the follow-up while it is typed (the prefetch), in the
window with a real llama engine (the tiny random-weight qwen35, a fixed seed): the follow-up asked then
is the same episode, byte for byte, and evaluates the prefetched tokens fewer."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from sqale_desktop.core.agent.events import Episode, EpisodeEnded
from sqale_desktop.core.agent.followup import Thread
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.engines.synthetic_gguf import TINY_SHAPE, write_qwen35_gguf
from sqale_desktop.core.history import History
from sqale_desktop.core.runtime import Runtime, episode_fn, open_tool_database
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.agent_runner import AgentWorker
from sqale_desktop.ui.main_window import MainWindow
from tests.ui.runtimes import scripted
from tests.ui.test_follow_up import ask_by_keys
from tests.ui.windows import open_page

CLICK = Qt.MouseButton.LeftButton
FIRST, SECOND = "How many tracks are there?", "Only the rock ones?"


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    """The tiny qwen35 under the settings' sampling with a fixed seed, so that the window's
    episodes and the reference's sample alike; room (24,576 tokens) for a continued follow-up."""
    model = write_qwen35_gguf(tmp_path / "tiny-qwen35.gguf", TINY_SHAPE, seed=3)
    base = scripted(lambda: LlamaEngine(model, n_ctx=24_576, n_threads=1))
    protocol = dataclasses.replace(
        base.protocol, sampling=dataclasses.replace(base.protocol.sampling, seed=7)
    )
    return dataclasses.replace(base, protocol=protocol, episode=episode_fn(base.settings, protocol))


@pytest.fixture
def window(qtbot: Any, tmp_path: Path, runtime: Runtime) -> Iterator[MainWindow]:
    made = MainWindow(Settings(), runtime, history=History(tmp_path / "history.sqlite"))
    qtbot.addWidget(made)
    made.show()
    yield made
    assert made.shutdown()


def without_window(runtime: Runtime, db_path: Path) -> Episode:
    """The same question and follow-up run directly on a second engine, with no prefetch."""
    engine = runtime.factory() if runtime.factory is not None else None
    assert isinstance(engine, LlamaEngine)
    db = open_tool_database(db_path, 30.0)
    try:
        runtime.warm_up(engine, threading.Event())
        episodes = []
        parent = None
        for question in (FIRST, SECOND):
            ended = [e for e in runtime.episode(engine, db, question, threading.Event(), parent=parent)]
            last = ended[-1]
            assert isinstance(last, EpisodeEnded)
            episodes.append(last.episode)
            parent = Thread.of(last.episode)
        return episodes[-1]
    finally:
        db.close()
        engine.close()


def test_clicking_follow_up_prefetches_and_the_follow_up_evaluates_fewer_tokens(
    qtbot: Any, window: MainWindow, runtime: Runtime, chinook: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sqale_desktop.ui.agent_runner")
    page = open_page(qtbot, window, chinook)
    first = ask_by_keys(qtbot, window, page, FIRST)
    assert first.ended_by not in ("cancelled", "error")
    view = page.chat.episodes[0]
    assert view.follow_up_button is not None

    def prefetched() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.getMessage().startswith("follow-up prefetched:")]

    qtbot.mouseClick(view.follow_up_button, CLICK)
    qtbot.waitUntil(lambda: bool(prefetched()), timeout=60_000)
    assert isinstance(prefetched()[0].args, tuple)
    tokens = int(prefetched()[0].args[0])
    followed = ask_by_keys(qtbot, window, page, SECOND)

    reference = without_window(runtime, chinook)
    assert followed.follow_up == reference.follow_up == "continued"
    assert followed.prompt == reference.prompt  # what was evaluated and generated: the same
    assert tokens >= 20  # the fixed start of the follow-up's turn, evaluated while it was typed
    assert followed.stats.evaluated_tokens == reference.stats.evaluated_tokens - tokens


def test_another_thread_a_standalone_question_or_stop_cancels_the_prefetch_its_own_follow_up_waits(
    qtbot: Any, runtime: Runtime
) -> None:
    worker = AgentWorker(runtime)
    thread = Thread("<|im_start|>system\nS<|im_end|>", ("Q?",), ("SELECT 1",))
    other = Thread("<|im_start|>system\nT<|im_end|>", ("R?",), ("SELECT 2",))
    cancel = worker.expect_prefetch(thread)
    assert cancel is not None
    worker.cancel_prefetch(thread)  # Enter on the same thread: the follow-up queues behind it
    assert not cancel.is_set()
    worker.cancel_prefetch(other)  # a follow-up to another answer
    assert cancel.is_set()
    for stop in (
        lambda: worker.cancel_prefetch(None),  # a standalone question
        lambda: worker.cancel(1),  # Stop
        lambda: worker.expect_prefetch(None),  # New question
        lambda: worker.expect_prefetch(other),  # Follow up on another answer
    ):
        cancel = worker.expect_prefetch(thread)
        assert cancel is not None and not cancel.is_set()
        stop()
        assert cancel.is_set()
