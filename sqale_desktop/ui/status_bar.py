"""The window's status bar: the last message, the running episode's context, the model's state.

The status bar says what happens now (opening, working, stopped) and what the model is doing
(loading with its progress, loaded, missing).  What concerns one tab (it opened, its episode
stopped, its context figure) is kept for that tab and shown while it is the current one: the bar
never shows another tab's news.  The message is one elided line (the whole text in its tooltip),
so a long one never widens the window.  The context figure changes once per agent turn while
an answer streams; it is a :class:`~sqale_desktop.ui.status_figure.StatusFigure`, which repaints
itself alone rather than relaying out the window (issue 32).
"""

from __future__ import annotations

import weakref

from PySide6.QtWidgets import QLabel, QProgressBar, QStatusBar, QWidget

from sqale_desktop.ui.banners import MessageLabel
from sqale_desktop.ui.status_figure import StatusFigure


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
        # Changes once per agent turn: a figure that relays out the window only when it widens.
        self.context_label = StatusFigure("", self)
        self.context_label.setObjectName("contextStatus")
        self.message_label = MessageLabel("", self, single_line=True)
        # Per tab: its last message and its context figure (tabs are the keys; closed ones go).
        self._news: weakref.WeakKeyDictionary[QWidget, str] = weakref.WeakKeyDictionary()
        self._contexts: weakref.WeakKeyDictionary[QWidget, str] = weakref.WeakKeyDictionary()
        self._current: QWidget | None = None
        self.context_about: QWidget | None = None
        """The tab whose episode reports its context (the one that ran last)."""
        self.addWidget(self.message_label, 1)
        self.addPermanentWidget(self.context_label)
        self.addPermanentWidget(self.model_progress)
        self.addPermanentWidget(self.model_label)

    def show_text(self, text: str, about: QWidget | None = None) -> None:
        """The latest message; it stays until the next one.  ``about``: the tab it concerns,
        which keeps it and shows it whenever that tab is current."""
        if about is not None:
            self._news[about] = text
            if about is not self._current:
                return
        self.message_label.set_message(text)

    def set_current(self, tab: QWidget | None) -> None:
        """Another tab is in front: show its last message and its context figure."""
        self._current = tab
        self.message_label.set_message(self._news.get(tab, "") if tab is not None else "")
        self.context_label.setText(self._contexts.get(tab, "") if tab is not None else "")

    def show_context(self, tokens: int, n_ctx: int) -> None:
        """The running episode's prompt has ``tokens`` of the ``n_ctx`` the engine holds."""
        self._set_context(f"context {tokens:,} / {n_ctx:,} tokens")

    def clear_context(self) -> None:
        self._set_context("")

    def _set_context(self, text: str) -> None:
        about = self.context_about
        if about is not None:
            self._contexts[about] = text
            if about is not self._current:
                return
        self.context_label.setText(text)

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
