"""Banners: messages at the top of a tab (or of the window) that stay until dismissed or replaced.

Each banner has a key ("damaged", "large_schema", "model"...), so a new message about the same
thing replaces the old one and a message about something else is added below it: a README error
never hides a damaged-file warning, and what concerns one database stays on its tab.  Above the
tabs, the window has one error banner (what concerns no tab: a file that did not open, the
settings) and the first-run offer to download the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

Kind = Literal["error", "warning", "info"]
COLOURS: dict[str, tuple[str, str]] = {
    "error": ("#b3261e", "white"),
    "warning": ("#f9a825", "black"),
    "info": ("#1565c0", "white"),
}


class Banner(QFrame):
    """One message with a Dismiss button (and optionally one action button)."""

    def __init__(self, key: str, text: str, kind: Kind, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.key = key
        self.kind = kind
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)  # as tall as its text
        self.setObjectName(f"banner_{kind}")
        background, foreground = COLOURS[kind]
        self.setAutoFillBackground(True)
        self.setStyleSheet(
            f"#banner_{kind} {{ background: {background}; }} #banner_{kind} QLabel {{ color: {foreground}; }}"
        )
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        self.label = QLabel(text, self)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.label, 1)
        self.action_button: QPushButton | None = None
        self.dismiss = QPushButton("Dismiss", self)
        layout.addWidget(self.dismiss)

    def set_action(self, text: str, callback: Callable[[], None]) -> None:
        if self.action_button is None:
            self.action_button = QPushButton(text, self)
            layout = self.layout()
            assert isinstance(layout, QHBoxLayout)
            layout.insertWidget(1, self.action_button)
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

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
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
        banner = Banner(key, text, kind, self)
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
    """The window's error line: the latest error that concerns no tab in particular."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        # A QWidget subclass paints a style-sheet background only when asked to (plain QWidget does).
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setAutoFillBackground(True)
        self.setStyleSheet("#errorBanner { background: #b3261e; } #errorBanner QLabel { color: white; }")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        self.label = QLabel("", self)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        dismiss = QPushButton("Dismiss", self)
        dismiss.clicked.connect(self.hide)
        layout.addWidget(self.label, 1)
        layout.addWidget(dismiss)
        self.hide()

    def show_text(self, text: str) -> None:
        self.label.setText(text)
        self.show()

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
