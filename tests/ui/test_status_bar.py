"""The status bar alone: what the runner's engine states and the episode's context look like."""

from __future__ import annotations

from typing import Any

from sqale_desktop.ui.status_bar import StatusBar


def test_loading_shows_progress_then_the_loaded_model(qtbot: Any) -> None:
    bar = StatusBar()
    qtbot.addWidget(bar)
    bar.show()
    bar.engine_state("loading", "loading SQaLe…")
    assert bar.model_progress.isVisible() and bar.model_progress.maximum() == 0  # busy, no figure yet
    assert bar.model_label.text() == "Model: loading SQaLe…"
    bar.load_progress(420)
    assert (bar.model_progress.maximum(), bar.model_progress.value()) == (1000, 420)
    bar.engine_state("ready", "local CPU")
    assert not bar.model_progress.isVisible() and bar.model_label.text() == "Model loaded · local CPU"
    bar.engine_state("failed", "no model installed")
    assert bar.model_label.text() == "Model: no model installed"


def test_messages_and_context(qtbot: Any) -> None:
    bar = StatusBar()
    qtbot.addWidget(bar)
    bar.show_text("Opened chinook.sqlite: 11 tables and views.")
    bar.show_context(12345, 16384)
    assert bar.message_label.text() == "Opened chinook.sqlite: 11 tables and views."
    assert bar.context_label.text() == "context 12,345 / 16,384 tokens"
    bar.clear_context()
    assert bar.context_label.text() == ""
