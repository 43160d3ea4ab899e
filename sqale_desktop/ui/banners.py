"""Banners: messages at the top of a tab (or of the window) that stay until dismissed or replaced.

Each banner has a key ("damaged", "large_schema", "model"...), so a new message about the same
thing replaces the old one and a message about something else is added below it: a README error
never hides a damaged-file warning, and what concerns one database stays on its tab.  Above the
tabs, the window has one error banner (what concerns no tab: a file that did not open, the
settings) and the first-run offer to download the model.

No message ever widens the window (an integrity check's report once pushed it to 2,313 px on a
1,600 px screen): a banner's text wraps, long unbroken runs (paths, hashes) may break anywhere,
and past a few lines it is cut, with the whole text in the tooltip and behind "Details…".  The
banners above every tab (the model's) are compact: one elided line each.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

Kind = Literal["error", "warning", "info"]
COLOURS: dict[str, tuple[str, str]] = {
    "error": ("#b3261e", "white"),
    "warning": ("#f9a825", "black"),
    "info": ("#1565c0", "white"),
}
MAX_LINES = 3
"""Lines of a message a wrapping banner shows; the rest is behind Details…"""
MAX_CHARS = 320
"""Characters of a message a wrapping banner shows (one long line wraps into several)."""
BREAK_AFTER = 24
"""A run of this many characters without a space gets a break opportunity (U+200B) after it."""
NARROWEST = 80
"""The least width (px) a message asks for; the window decides the rest."""
TOOLTIP_CHARS = 2_000


def breakable(text: str) -> str:
    """``text`` with a zero-width space after every ``BREAK_AFTER`` characters of an unbroken run,
    so that a path or a hash wraps instead of setting the label's minimum width."""
    return re.sub(rf"\S{{{BREAK_AFTER}}}(?=\S)", lambda m: m.group(0) + "\u200b", text)


def shown_part(text: str) -> tuple[str, bool]:
    """The part of ``text`` a wrapping banner shows, and whether some was left out."""
    lines = text.splitlines() or [""]
    shown = "\n".join(lines[:MAX_LINES])
    cut = len(lines) > MAX_LINES
    if len(shown) > MAX_CHARS:
        shown, cut = shown[:MAX_CHARS].rstrip(), True
    return (shown + "…" if cut else shown), cut


class MessageLabel(QLabel):
    """A message that never widens its window; ``text()`` is always the whole message.

    Wrapping (the default), it shows at most ``MAX_LINES`` lines; ``single_line``, it shows one
    line elided to the width the layout gives it (the status bar, compact banners).  Whenever
    part of the message is hidden, the tooltip holds the whole of it.

    Signals:
        cut_changed(bool): whether part of the message is now hidden.
    """

    cut_changed = Signal(bool)

    def __init__(self, text: str = "", parent: QWidget | None = None, *, single_line: bool = False) -> None:
        super().__init__(parent)
        self._full = ""
        self._cut = False
        self._single_line = single_line
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(not single_line)
        self.set_message(text)

    def set_message(self, text: str) -> None:
        self._full = text
        self._refit()

    def setText(self, text: str) -> None:
        self.set_message(text)

    def text(self) -> str:
        return self._full

    def is_cut(self) -> bool:
        return self._cut

    def minimumSizeHint(self) -> QSize:
        return QSize(min(NARROWEST, super().minimumSizeHint().width()), super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        if self._single_line:  # what the elided line needs, never the whole message's length
            return QSize(min(hint.width(), 4 * NARROWEST), hint.height())
        return hint

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self._single_line:
            self._refit()

    def _refit(self) -> None:
        if self._single_line:
            flat = " · ".join(line.strip() for line in self._full.splitlines() if line.strip())
            shown = self.fontMetrics().elidedText(flat, Qt.TextElideMode.ElideRight, max(self.width(), 1))
            cut = shown != flat
        else:
            part, cut = shown_part(self._full)
            shown = breakable(part)
        if shown != super().text():
            super().setText(shown)
        self.setToolTip(self._full[:TOOLTIP_CHARS] if cut else "")
        if cut != self._cut:
            self._cut = cut
            self.cut_changed.emit(cut)


def show_details(banner: QWidget, text: str) -> None:
    """The whole of a message that a banner shows only part of.

    The box belongs to the banner's window, not to the banner: a dialog is a child widget like any
    other, so it would take the banner's style sheet (its white text, on the dialog's own light
    grey: issue 32, item 2).  The banners' rules are scoped to their own children as well
    (``banner_sheet``), so neither alone is what keeps a dialog readable.
    """
    box = QMessageBox(QMessageBox.Icon.Information, "Message", shown_part(text)[0], parent=banner.window())
    box.setObjectName("messageDetails")
    box.setDetailedText(text)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    box.exec()


def banner_sheet(name: str, background: str, foreground: str, *, compact: bool = False) -> str:
    """The style sheet of the banner named ``name``: its background, and the colour of its own
    labels (``>``: direct children only).  ``#name QLabel`` would reach every label below the
    banner, a dialog's too: a QMessageBox opened from it showed white text on light grey."""
    sheet = f"#{name} {{ background: {background}; }} #{name} > QLabel {{ color: {foreground}; }}"
    if compact:
        sheet += f" #{name} > QPushButton {{ padding: 1px 8px; }}"
    return sheet


class Banner(QFrame):
    """One message with a Dismiss button (and optionally one action button).

    ``compact``: one elided line and small margins, for the banners that stay above every tab.
    """

    def __init__(
        self, key: str, text: str, kind: Kind, parent: QWidget | None = None, *, compact: bool = False
    ) -> None:
        super().__init__(parent)
        self.key = key
        self.kind = kind
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)  # as tall as its text
        self.setObjectName(f"banner_{kind}")
        background, foreground = COLOURS[kind]
        self.setAutoFillBackground(True)
        self.setStyleSheet(banner_sheet(f"banner_{kind}", background, foreground, compact=compact))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(*((8, 2, 8, 2) if compact else (10, 6, 10, 6)))
        self.label = MessageLabel(text, self, single_line=compact)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.label, 1)
        self.details = QPushButton("Details…", self)
        self.details.setToolTip("The whole message")
        self.details.clicked.connect(lambda: show_details(self, self.text()))
        self.details.setVisible(self.label.is_cut())
        self.label.cut_changed.connect(self.details.setVisible)
        layout.addWidget(self.details)
        self.action_button: QPushButton | None = None
        self.dismiss = QPushButton("Dismiss", self)
        layout.addWidget(self.dismiss)

    def set_action(self, text: str, callback: Callable[[], None]) -> None:
        if self.action_button is None:
            self.action_button = QPushButton(text, self)
            layout = self.layout()
            assert isinstance(layout, QHBoxLayout)
            layout.insertWidget(2, self.action_button)
        self.action_button.setText(text)
        self.action_button.clicked.connect(callback)

    def text(self) -> str:
        return self.label.text()


class BannerStack(QWidget):
    """Keyed banners, newest last.

    Signals:
        changed(): a banner was shown, replaced or dismissed.
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None, *, compact: bool = False) -> None:
        super().__init__(parent)
        self._compact = compact
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(1)
        self._banners: dict[str, Banner] = {}
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.hide()

    def show_banner(
        self,
        key: str,
        text: str,
        kind: Kind = "error",
        action: tuple[str, Callable[[], None]] | None = None,
    ) -> Banner:
        """Show ``text`` under ``key`` (replacing that key's banner, keeping the others)."""
        self.dismiss(key, notify=False)
        banner = Banner(key, text, kind, self, compact=self._compact)
        banner.dismiss.clicked.connect(lambda: self.dismiss(key))
        if action is not None:
            banner.set_action(*action)
        self._banners[key] = banner
        self._layout.addWidget(banner)
        self.show()
        self.changed.emit()
        return banner

    def dismiss(self, key: str, notify: bool = True) -> None:
        banner = self._banners.pop(key, None)
        if banner is not None:
            banner.hide()
            banner.deleteLater()
        self.setVisible(bool(self._banners))
        if notify and banner is not None:
            self.changed.emit()

    def texts(self) -> dict[str, str]:
        """Key -> text of the banners shown (what tests and the status bar read)."""
        return {key: banner.text() for key, banner in self._banners.items()}

    def banner(self, key: str) -> Banner | None:
        return self._banners.get(key)


class ErrorBanner(QWidget):
    """The window's error line: the latest error that concerns no tab in particular.

    ``topic`` says what the error is about ("open": a file that did not open), so that what
    answers it (a file that opened) can take it away while other errors (the settings) stay.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        # A QWidget subclass paints a style-sheet background only when asked to (plain QWidget does).
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setAutoFillBackground(True)
        self.setStyleSheet(banner_sheet("errorBanner", *COLOURS["error"]))
        self.topic = ""
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        self.label = MessageLabel("", self)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details = QPushButton("Details…", self)
        self.details.clicked.connect(lambda: show_details(self, self.text()))
        self.details.hide()
        self.label.cut_changed.connect(self.details.setVisible)
        dismiss = QPushButton("Dismiss", self)
        dismiss.clicked.connect(self.hide)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.details)
        layout.addWidget(dismiss)
        self.hide()

    def show_text(self, text: str, topic: str = "") -> None:
        self.topic = topic
        self.label.set_message(text)
        self.show()

    def clear_topic(self, topic: str) -> None:
        """Hide the banner if what it shows is about ``topic`` (it has been answered)."""
        if self.topic == topic and not self.isHidden():
            self.hide()

    def text(self) -> str:
        return self.label.text()


class ModelOffer(QWidget):
    """First run without a model: what works now, and one click to get the model.

    Signals:
        download_requested(): the user clicked "Download the model…".
    """

    download_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelOffer")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        label = QLabel(
            "No model is installed yet. Browsing and SQL work now; to ask questions in plain words, "
            "download the SQaLe model (about 1.2 GB).",
            self,
        )
        label.setWordWrap(True)
        download = QPushButton("Download the model…", self)
        download.setToolTip("Finds the suggested GGUF build, downloads it with progress and selects it")
        download.clicked.connect(lambda: self.download_requested.emit())
        later = QPushButton("Later", self)
        later.clicked.connect(self.hide)
        layout.addWidget(label, 1)
        layout.addWidget(download)
        layout.addWidget(later)
        self.hide()
