"""Dialogs are readable in both themes: the text a person reads stands out from its background.

Issue 32, item 2: the red banner's ``QLabel { color: white }`` reached the ``QMessageBox`` its
Details… button opened (the box was the banner's child), and the light theme showed white on
light grey.  The figure is read from the pixels painted, not from a palette, so that whatever
decides the colour (palette, style sheet, a parent's style sheet) is what is checked.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QLabel, QMessageBox, QPushButton, QWidget

from sqale_desktop.ui.banners import Banner, BannerStack
from sqale_desktop.ui.main_window import MainWindow
from sqale_desktop.ui.palette import apply_theme
from tests.ui.windows import WindowFactory, settle

READABLE = 4.5
"""WCAG's least contrast for body text."""
LONG = "\n".join(f"line {i}: row {i} missing from index sqlite_autoindex_notes_{i}" for i in range(12))
"""A message long enough for the banner to cut it and offer Details…"""


def luminance(colour: QColor) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(colour.red()) + 0.7152 * channel(colour.green()) + 0.0722 * channel(colour.blue())


def contrast(a: QColor, b: QColor) -> float:
    """The WCAG contrast ratio of two colours (1 to 21)."""
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def painted_contrast(widget: QWidget) -> float:
    """The contrast between the background ``widget`` paints (its commonest colour) and the pixel
    of its text that differs most from it: below 4.5, a person strains to read it.  Grabbed as
    its parent paints it (a label paints no background of its own: the banner's red is there)."""
    parent = widget.parentWidget()
    image = (parent.grab(widget.geometry()) if parent is not None else widget.grab()).toImage()
    colours = Counter(image.pixel(x, y) for y in range(image.height()) for x in range(image.width()))
    background = QColor.fromRgb(colours.most_common(1)[0][0])
    return max(contrast(QColor.fromRgb(rgb), background) for rgb in colours)


def dialog_contrasts(dialog: QWidget) -> dict[str, float]:
    """Each label with text in ``dialog``: its painted contrast."""
    return {
        label.text()[:40]: painted_contrast(label)
        for label in dialog.findChildren(QLabel)
        if label.isVisible() and label.text().strip() and label.pixmap().isNull()
    }


def read_modal(qtbot: Any, open_it: Callable[[], None], kind: type[QWidget]) -> dict[str, float]:
    """Run ``open_it`` (a click that opens a modal dialog of type ``kind``), read its labels'
    contrast while it is open, and close it with its OK button, by the mouse."""
    seen: list[dict[str, float]] = []
    deadline = time.monotonic() + 20

    def look() -> None:
        dialog = QApplication.activeModalWidget()
        if dialog is None or not isinstance(dialog, kind) or not dialog.isVisible():
            if time.monotonic() < deadline:
                QTimer.singleShot(10, look)  # not open yet
            elif dialog is not None:
                dialog.close()  # another dialog: the assertion below says so
            return
        settle()
        seen.append(dialog_contrasts(dialog))
        ok = next(b for b in dialog.findChildren(QPushButton) if b.text().replace("&", "") == "OK")
        qtbot.mouseClick(ok, Qt.MouseButton.LeftButton)

    QTimer.singleShot(0, look)
    open_it()  # exec() returns once the dialog is closed
    assert seen, f"no {kind.__name__} opened"
    return seen[0]


def themed_window(make_window: WindowFactory, theme: str) -> MainWindow:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app, theme)
    window = make_window([])
    window.resize(900, 600)
    return window


def click_details(qtbot: Any, details: QPushButton) -> Callable[[], None]:
    def click() -> None:
        qtbot.waitUntil(details.isVisible)
        qtbot.mouseClick(details, Qt.MouseButton.LeftButton)

    return click


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_red_banners_details_dialog_is_readable(
    qtbot: Any, make_window: WindowFactory, themed: None, theme: str
) -> None:
    window = themed_window(make_window, theme)
    window.show_error(f"Could not open report.sqlite:\n{LONG}")
    banner = window.banner
    seen = read_modal(qtbot, click_details(qtbot, banner.details), QMessageBox)
    assert any(text.startswith("Could not open report.sqlite") for text in seen)
    assert all(figure >= READABLE for figure in seen.values()), seen
    assert painted_contrast(banner.label) >= READABLE  # the banner's own white on red still is


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize(("kind", "compact"), [("error", False), ("warning", True), ("info", False)])
def test_every_banners_details_dialog_is_readable(
    qtbot: Any, make_window: WindowFactory, themed: None, theme: str, kind: Any, compact: bool
) -> None:
    """A tab's banners (error, info) and the compact model banners above every tab (warning)."""
    window = themed_window(make_window, theme)
    stack = window.model_banners if compact else BannerStack(window.centralWidget())
    central = window.centralWidget().layout()
    if not compact:
        assert central is not None
        central.addWidget(stack)
    banner: Banner = stack.show_banner("report", f"The {kind} report:\n{LONG}", kind)
    settle()
    seen = read_modal(qtbot, click_details(qtbot, banner.details), QMessageBox)
    assert any(text.startswith(f"The {kind} report") for text in seen)
    assert all(figure >= READABLE for figure in seen.values()), seen
    assert painted_contrast(banner.label) >= READABLE
