"""The window's error banner and first-run model offer, alone."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QPushButton, QVBoxLayout, QWidget

from sqale_desktop.ui.banners import ErrorBanner, ModelOffer


def button(widget: Any, text: str) -> QPushButton:
    return next(b for b in widget.findChildren(QPushButton) if b.text() == text)


def test_the_error_banner_shows_the_latest_error_until_dismissed(qtbot: Any) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    banner = ErrorBanner(window)
    QVBoxLayout(window).addWidget(banner)
    window.resize(400, 80)
    window.show()
    assert banner.isHidden()
    banner.show_text("Could not open a.sqlite: no such file")
    banner.show_text("Could not open b.sqlite: no such file")
    assert banner.isVisible() and banner.text() == "Could not open b.sqlite: no such file"
    # Red inside the window too (a QWidget subclass paints no style-sheet background unless asked).
    corner = banner.geometry().topLeft()
    assert window.grab().toImage().pixelColor(corner.x() + 2, corner.y() + 2).name() == "#b3261e"
    button(banner, "Dismiss").click()
    assert banner.isHidden()


def test_the_offer_asks_for_the_download_or_goes_away(qtbot: Any) -> None:
    offer = ModelOffer()
    qtbot.addWidget(offer)
    assert offer.isHidden()
    offer.show()
    with qtbot.waitSignal(offer.download_requested, timeout=1_000):
        button(offer, "Download the model…").click()
    button(offer, "Later").click()
    assert offer.isHidden()
