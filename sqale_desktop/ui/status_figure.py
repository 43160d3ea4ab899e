"""A one-line figure in the status bar that changes while an episode runs, without relaying out the
window each time.

The status bar's context figure ("context 3,266 / 8,192 tokens") changes once per turn of the
agent.  A ``QLabel`` calls ``updateGeometry`` on every ``setText``, and the status bar is part of
the main window's layout, so each new figure relaid out the whole window: 35-47 ms on the UI thread
while the answer streamed (``benchmarks/ui.py``; issue 32).  This widget keeps the widest width it
has needed since it was last empty, and asks for room only when a figure needs more (a figure gains
a digit), so a new figure of the same width or narrower repaints this widget alone.  Emptied, it
gives its room back (once per episode or tab switch, not per turn).

QLabel has no way to say "my size did not change", hence a small widget of our own
(:class:`~sqale_desktop.ui.painted_text.PaintedText`), like
:class:`~sqale_desktop.ui.status_text.StatusText` for the wrapped live lines.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QSizePolicy, QWidget

from sqale_desktop.ui.painted_text import PaintedText

_FLAGS = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter | Qt.TextFlag.TextSingleLine


class StatusFigure(PaintedText):
    """Plain text on one line; ``text()`` is what was set.  Its width only grows until emptied."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(_FLAGS, parent)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Preferred)
        self._width = 0
        self.setText(text)

    def sizeHint(self) -> QSize:
        margins = self.contentsMargins()
        return QSize(self._width, self.fontMetrics().height() + margins.top() + margins.bottom())

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()

    def _refit(self) -> None:
        """Ask for room only when the text needs more than the widest so far, or when emptied."""
        needed = self._needed(self._text)
        if needed > self._width or not self._text:
            self._width = needed
            self.updateGeometry()

    def _needed(self, text: str) -> int:
        if not text:
            return 0
        margins = self.contentsMargins()
        return self.fontMetrics().horizontalAdvance(text) + margins.left() + margins.right()
