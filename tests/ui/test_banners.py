"""The window's error banner and first-run model offer, alone."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget

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


def test_a_long_message_wraps_and_never_widens_its_window(qtbot: Any) -> None:
    """Issue 20, item 2: an unbroken path and a many-line report, in a 600 px window."""
    from sqale_desktop.ui.banners import MAX_LINES, BannerStack

    window = QWidget()
    qtbot.addWidget(window)
    layout = QVBoxLayout(window)
    error = ErrorBanner(window)
    stack = BannerStack(window)
    layout.addWidget(error)
    layout.addWidget(stack)
    window.resize(600, 300)
    window.show()
    path = "/home/someone/" + "a_folder_whose_name_never_ends_" * 8 + "shop.sqlite"
    report = "\n".join(f"row {i} missing from index sqlite_autoindex_notes_{i}" for i in range(40))
    error.show_text(f"Could not open {path}: not a database")
    banner = stack.show_banner("damaged", f"shop.sqlite is damaged:\n{report}", "error")
    qtbot.waitUntil(lambda: banner.details.isVisible())
    assert window.minimumSizeHint().width() <= 600 and window.width() == 600
    assert error.text().endswith("not a database")  # the whole message, though shown wrapped
    assert banner.text().endswith("sqlite_autoindex_notes_39")
    assert banner.label.toolTip().startswith("shop.sqlite is damaged")  # the whole text on hover
    assert len(QLabel.text(banner.label).splitlines()) == MAX_LINES  # what is shown: cut, with "…"
    assert QLabel.text(banner.label).endswith("…")


def test_compact_banners_are_one_line_each(qtbot: Any) -> None:
    """Issue 20, item 13: the two model banners in a 1024 px window take one line each."""
    from sqale_desktop.ui.banners import BannerStack

    window = QWidget()
    qtbot.addWidget(window)
    stack = BannerStack(window, compact=True)
    QVBoxLayout(window).addWidget(stack)
    window.resize(1024, 400)
    window.show()
    fitness = stack.show_banner(
        "fitness",
        "my-model.gguf is not one of the SQaLe agents (architecture llama, a chat template without "
        "tool calls; the agents are Qwen3.5-2B, architecture qwen35). It was not trained for this tool "
        "protocol and will most likely answer nothing. Tools → Model Manager… downloads a SQaLe agent.",
        "warning",
        ("Models…", lambda: None),
    )
    stack.show_banner(
        "context",
        "The context is set to 16,384 tokens, above the 8,192 SQaLe was trained for; the engine is "
        "given 8,192 (Settings → Context sets it).",
        "warning",
    )
    qtbot.waitUntil(lambda: fitness.details.isVisible())
    line = fitness.label.fontMetrics().height()
    assert stack.sizeHint().height() <= 2 * (line + 16)
    assert fitness.label.toolTip().startswith("my-model.gguf is not one")
