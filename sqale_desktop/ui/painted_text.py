"""Text that a widget paints itself, so that setting new text need not relay out the window.

``QLabel.setText`` always calls ``updateGeometry``: the layouts above it, up to the main window,
are recomputed each time (issue 32).  The status bar's figure and the wrapped live lines change
many times per answer, so each is a small widget of its own that asks for room only when its text
needs a different size.  They differ only in how they decide that; keeping, setting and painting
the text is written here once.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QWidget


class PaintedText(QWidget):
    """Plain text drawn in the contents rectangle with ``flags``; ``text()`` is what was set.

    A subclass decides in ``_refit`` whether the new text needs other room, and calls
    ``updateGeometry`` only then; a new text otherwise repaints this widget alone.
    """

    def __init__(self, flags: Qt.AlignmentFlag, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._flags = flags
        self._text = ""

    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:
        if text == self._text:
            return
        self._text = text
        self._refit()
        self.update()

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(self.contentsRect(), self._flags, self._text)

    def _refit(self) -> None:
        """Ask the layout for room (``updateGeometry``) if the text now needs a different size."""
        raise NotImplementedError
