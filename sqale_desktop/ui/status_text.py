"""A status line that changes many times a second while an answer streams, without relaying out the
window each time.

The chat pane's live line and each episode's progress line ("5 tool turns left · 21.3 tok/s ·
4.2 s") change with every streamed batch.  Both wrap, so that a long reason never widens the pane.
A word-wrapped ``QLabel`` calls ``updateGeometry`` on every ``setText`` (its height depends on its
text), and the layouts above it, up to the splitter and the main window, are recomputed each time:
the whole window was repainted per batch, half of the repaints while an episode streams
(``benchmarks/ui.py``; issue 32).  This widget asks its layout for room only when the height it needs
changes, that is when the text gains or loses a wrapped line, and otherwise repaints itself alone.

QLabel has no way to say "my size did not change" (``QLabel::setText`` always updates its geometry),
hence a small widget of our own rather than a subclass (a
:class:`~sqale_desktop.ui.painted_text.PaintedText`, as the status bar's figure is).
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

from sqale_desktop.ui.painted_text import PaintedText

_FLAGS = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextWordWrap
_TALL = 1_000_000


class StatusText(PaintedText):
    """Plain text, word-wrapped to the width the layout gives it; ``text()`` is what was set."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(_FLAGS, parent)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self._height = 0
        self.setText(text)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        if not self._text:
            return 0
        margins = self.contentsMargins()
        inner = max(width - margins.left() - margins.right(), 1)
        rect = self.fontMetrics().boundingRect(QRect(0, 0, inner, _TALL), _FLAGS, self._text)
        return rect.height() + margins.top() + margins.bottom()

    def sizeHint(self) -> QSize:
        # No width of its own: the text wraps to whatever the layout gives, so it never widens it.
        return QSize(0, self._height_now())

    def minimumSizeHint(self) -> QSize:
        return QSize(0, self._height_now())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._refit()

    def _height_now(self) -> int:
        return self.heightForWidth(self.width() if self.width() > 0 else _TALL)

    def _refit(self) -> None:
        """Ask the layout for room only when the height needed at this width changed."""
        height = self._height_now()
        if height != self._height:
            self._height = height
            self.updateGeometry()
