"""The window's status bar: the last message, the running episode's context, the model's state.

The status bar says what happens now (opening, working, stopped) and what the model is doing
(loading with its progress, loaded, missing); it keeps no state of its own beyond what it shows.
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QProgressBar, QStatusBar, QWidget


class StatusBar(QStatusBar):
    """Message on the left; context use, the model's load progress and its state on the right."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model_label = QLabel("", self)
        self.model_label.setObjectName("modelStatus")
        self.model_progress = QProgressBar(self)
        self.model_progress.setMaximumWidth(140)
        self.model_progress.setTextVisible(False)
        self.model_progress.hide()
        self.context_label = QLabel("", self)
        self.context_label.setObjectName("contextStatus")
        self.message_label = QLabel("", self)
        self.addWidget(self.message_label, 1)
        self.addPermanentWidget(self.context_label)
        self.addPermanentWidget(self.model_progress)
        self.addPermanentWidget(self.model_label)

    def show_text(self, text: str) -> None:
        """The latest message; it stays until the next one."""
        self.message_label.setText(text)

    def show_context(self, tokens: int, n_ctx: int) -> None:
        """The running episode's prompt has ``tokens`` of the ``n_ctx`` the engine holds."""
        self.context_label.setText(f"context {tokens:,} / {n_ctx:,} tokens")

    def clear_context(self) -> None:
        self.context_label.setText("")

    def engine_state(self, state: str, text: str) -> None:
        """The agent runner's ``engine_state``: a busy indicator while loading, then the model."""
        if state == "loading":
            self.model_progress.setRange(0, 0)
            self.model_progress.show()
            self.model_label.setText(f"Model: {text}")
        elif state == "ready":
            self.model_progress.hide()
            self.model_label.setText(f"Model loaded · {text}")
        else:
            self.model_progress.hide()
            self.model_label.setText(f"Model: {text}")

    def load_progress(self, thousandths: int) -> None:
        """The engine reports how far loading got: the busy indicator becomes a percentage."""
        self.model_progress.setRange(0, 1000)
        self.model_progress.setValue(thousandths)
