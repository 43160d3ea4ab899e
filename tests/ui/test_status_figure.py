"""The status bar's context figure changes without relaying out the window (issue 32: each new
figure, once per agent turn, relaid out the whole main window while the answer streamed)."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QApplication

from sqale_desktop.ui.status_figure import StatusFigure
from tests.helpers import shared_data
from tests.ui.test_status_text import Counter
from tests.ui.windows import WindowFactory, open_page, settle

TURNS = [2100, 2954, 3870, 4411, 5023, 6678, 7204, 7999]  # the prompt grows turn after turn


def test_new_context_figures_relayout_nothing_once_the_figure_is_as_wide(
    qtbot: Any, make_window: WindowFactory
) -> None:
    window = make_window()
    page = open_page(qtbot, window, shared_data("sample/chinook.sqlite"))
    bar = window.status
    bar.context_about = page
    figure = bar.context_label
    assert isinstance(figure, StatusFigure)
    for tokens in TURNS:  # an earlier episode: the figure has been this wide
        bar.show_context(tokens, 8192)
    settle()
    counter = Counter(window)
    QApplication.instance().installEventFilter(counter)  # type: ignore[union-attr]
    try:
        for tokens in TURNS:
            bar.show_context(tokens, 8192)
            settle()
    finally:
        QApplication.instance().removeEventFilter(counter)  # type: ignore[union-attr]
    assert figure.text() == "context 7,999 / 8,192 tokens"
    assert counter.layouts == 0, counter.layouts
    assert counter.whole_paints == 0, counter.whole_paints
    assert figure.width() >= figure.fontMetrics().horizontalAdvance(figure.text())  # all of it shows


def test_a_wider_figure_gets_room_and_an_emptied_one_gives_it_back(
    qtbot: Any, make_window: WindowFactory
) -> None:
    window = make_window()
    page = open_page(qtbot, window, shared_data("sample/chinook.sqlite"))
    bar = window.status
    bar.context_about = page
    figure = bar.context_label
    bar.show_context(950, 16384)
    settle()
    narrow = figure.width()
    bar.show_context(12345, 16384)
    settle()
    assert figure.text() == "context 12,345 / 16,384 tokens"
    assert figure.width() >= figure.fontMetrics().horizontalAdvance(figure.text()) > narrow
    bar.show_context(980, 16384)  # narrower: the figure keeps its room and shows the new text
    settle()
    assert figure.text() == "context 980 / 16,384 tokens"
    assert figure.width() >= figure.fontMetrics().horizontalAdvance("context 12,345 / 16,384 tokens")
    bar.clear_context()
    settle()
    assert figure.text() == "" and figure.width() == 0
