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


def test_each_tab_keeps_its_news_and_context(qtbot: Any) -> None:
    """Issue 20, item 9: the bar shows the tab in front's message and context figure, never another's."""
    from PySide6.QtWidgets import QWidget

    bar = StatusBar()
    qtbot.addWidget(bar)
    shop, chinook = QWidget(), QWidget()
    bar.set_current(shop)
    bar.show_text("Opened shop.sqlite: 6 tables and views.", shop)
    bar.context_about = shop
    bar.show_context(3266, 8192)
    bar.show_text("Opened chinook.sqlite: 11 tables and views.", chinook)  # opening in the background
    assert bar.message_label.text() == "Opened shop.sqlite: 6 tables and views."
    bar.set_current(chinook)
    assert bar.message_label.text() == "Opened chinook.sqlite: 11 tables and views."
    assert bar.context_label.text() == ""  # the shop's episode's figure stays with the shop
    bar.set_current(shop)
    assert bar.context_label.text() == "context 3,266 / 8,192 tokens"
    bar.show_text("Could not save settings: disk full")  # about no tab: shown whatever is in front
    assert bar.message_label.text() == "Could not save settings: disk full"


def test_a_long_message_is_one_elided_line(qtbot: Any) -> None:
    bar = StatusBar()
    qtbot.addWidget(bar)
    bar.resize(500, 30)
    bar.show()
    long = "shop.sqlite is damaged (SQLite's integrity check: " + "row 7 missing from index i; " * 40 + ")"
    bar.show_text(long)
    assert bar.minimumSizeHint().width() <= 500 and bar.sizeHint().width() <= 800
    qtbot.waitUntil(lambda: bar.message_label.toolTip() == long)
    assert bar.message_label.text() == long
