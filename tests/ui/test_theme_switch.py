"""Switching the theme while the app runs restyles what is already on screen: the widgets of a
window switched Light → Dark (and Dark → Light) look as in a window started in that theme."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import QApplication, QWidget

from sqale_desktop.ui.chat_widgets import AnswerCard, ThinkingBox
from sqale_desktop.ui.main_window import MainWindow
from sqale_desktop.ui.palette import apply_theme
from tests.ui.windows import WindowFactory, open_page, settle


def colour_pixels(widget: QWidget, colour: QColor) -> int:
    """Pixels of exactly ``colour`` in what the widget paints (a link's underline is solid)."""
    image: QImage = widget.grab().toImage()
    return sum(
        image.pixelColor(x, y).rgb() == colour.rgb()
        for y in range(image.height())
        for x in range(image.width())
    )


def with_cards(
    qtbot: Any, make_window: WindowFactory, chinook: Path
) -> tuple[MainWindow, AnswerCard, ThinkingBox]:
    """A window with an answered question (thinking, tool cards, the answer with its Chart link)
    and a model banner with an action button."""
    window = make_window()
    window.model_banners.show_banner(
        "fitness", "Not one of the SQaLe agents.", "warning", ("Models…", lambda: None)
    )
    page = open_page(qtbot, window, chinook)
    page.chat.question.setPlainText("Which artists have the most albums?")
    with qtbot.waitSignal(window.episode_finished, timeout=20_000):
        page.chat.ask_button.click()
    view = page.chat.episodes[0]
    assert view.answer is not None and view.answer.chartable
    thinking = next(turn.thinking for turn in view.turns.values() if turn.thinking.plain_text())
    thinking.set_expanded(True)
    return window, view.answer, thinking


def looks(window: MainWindow, answer: AnswerCard, thinking: ThinkingBox) -> dict[str, Any]:
    """What a person sees of the widgets a theme switch left behind (issue 20)."""
    banner = window.model_banners.banner("fitness")
    assert banner is not None and banner.action_button is not None
    first = thinking.text.document().begin().begin().fragment().charFormat()
    return {
        "toggle": thinking.toggle.grab().toImage(),
        "toggle text": thinking.toggle.palette().color(QPalette.ColorRole.ButtonText).rgb(),
        "thinking grey": first.foreground().color().rgba(),
        "dismiss": banner.dismiss.grab().toImage(),
        "action": banner.action_button.grab().toImage(),
        "dismiss button": banner.dismiss.palette().color(QPalette.ColorRole.Button).rgb(),
    }


@pytest.mark.parametrize(("first", "second"), [("light", "dark"), ("dark", "light")])
def test_a_theme_switch_restyles_the_cards_and_banners_already_shown(
    qtbot: Any,
    make_window: WindowFactory,
    chinook: Path,
    artifacts: Path,
    themed: None,
    first: str,
    second: str,
) -> None:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app, first)
    old_link = app.palette().color(QPalette.ColorRole.Link)
    window, answer, thinking = with_cards(qtbot, make_window, chinook)
    assert colour_pixels(answer.details, old_link) > 0  # the "Chart" link, in the first theme's colour

    # Settings → Theme → OK, as the dialog's OK applies it.
    window.apply_settings(dataclasses.replace(window.settings, theme=second))
    settle()
    new_link = app.palette().color(QPalette.ColorRole.Link)
    assert new_link.rgb() != old_link.rgb()
    window.grab().save(str(artifacts / f"theme_switched_{first}_to_{second}.png"))
    switched = looks(window, answer, thinking)
    assert colour_pixels(answer.details, new_link) > 0 and colour_pixels(answer.details, old_link) == 0

    # A window started in the second theme: the switched one must look the same.
    fresh_window, fresh_answer, fresh_thinking = with_cards(qtbot, make_window, chinook)
    settle()
    fresh = looks(fresh_window, fresh_answer, fresh_thinking)
    fresh_window.grab().save(str(artifacts / f"theme_started_{second}.png"))
    for key, value in fresh.items():
        assert switched[key] == value, key
