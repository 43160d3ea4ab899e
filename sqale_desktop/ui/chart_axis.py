"""The chart's category axis: a name under every bar, turned upright when the names do not fit side
by side.

pyqtgraph's own axis writes tick labels horizontally only and drops those that would leave its
rectangle, so 24 country names under 24 bars came out as 2 labels.  Here every category gets its
name: horizontal while the widest name fits in the room of one category, upright (read bottom to
top) otherwise, elided past ``MAX_LABEL_PX`` (the chart's hover readout has the whole name); only
when even upright names would overlap (more categories than lines of text fit across) is every
``every``-th labelled, and the chart says so.  Categories carry no scale: the automatic SI prefix,
which wrote "name (x0.001)" under a one-row chart, is off.

Imported by ``ui.chart_view`` when the chart is first built (pyqtgraph loads then, not at launch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFontMetricsF, QPainter

MAX_LABEL_PX = 160
"""An upright name is elided past this many pixels, so a long one cannot squeeze the plot."""
GAP_PX = 6
"""Room kept between two horizontal names (or two upright lines)."""


class CategoryAxis(pg.AxisItem):  # type: ignore[misc]  # pyqtgraph ships no type information
    """A bottom axis that names the categories at x = 0, 1, 2, …

    ``labels`` holds the texts drawn last (for tests and the exported picture alike), ``upright``
    whether they were turned, ``every`` the labelling step (1: every category).
    """

    def __init__(self) -> None:
        super().__init__("bottom")
        self.enableAutoSIPrefix(False)  # names are not a quantity to scale
        self._names: list[str] = []
        self._extent = 0.0
        self.upright = False
        self.every = 1
        self.labels: list[str] = []
        self._placed: list[tuple[float, str]] = []
        self.on_every: Callable[[int], None] | None = None
        """Called when the labelling step changes (the chart states the rule it follows)."""

    def set_names(self, names: Sequence[str]) -> None:
        self._names = list(names)
        # A tick (and grid line) at every category; drawPicture writes the names, not pyqtgraph.
        self.setTicks([[(float(i), name) for i, name in enumerate(self._names)]])
        self.picture = None
        self.update()

    def _metrics(self) -> QFontMetricsF:
        font = self.style["tickFont"]
        return QFontMetricsF(font) if font is not None else QFontMetricsF(self.font())

    def _plan(self) -> None:
        """Decide, for the current width and range, how the names are written."""
        names = self._names
        low, high = self.range
        bounds = self.mapRectFromParent(self.geometry())
        self._placed = []
        if not names or high <= low or bounds.width() <= 0:
            self._extent = 0.0
            return
        scale = bounds.width() / (high - low)  # pixels per category
        metrics = self._metrics()
        widest = max(metrics.horizontalAdvance(name) for name in names)
        line = metrics.height()
        self.upright = widest + GAP_PX > scale
        every = max(1, math.ceil((line + GAP_PX) / scale)) if self.upright else 1
        if every != self.every:
            self.every = every
            if self.on_every is not None:
                self.on_every(every)
        if self.upright:
            elided = [metrics.elidedText(n, Qt.TextElideMode.ElideRight, MAX_LABEL_PX) for n in names]
            self._extent = max(metrics.horizontalAdvance(n) for n in elided)
        else:
            elided, self._extent = names, line
        for i in range(0, len(names), every):
            x = bounds.left() + (i - low) * scale
            if bounds.left() - 0.5 <= x <= bounds.right() + 0.5:
                self._placed.append((x, elided[i]))

    def _updateMaxTextSize(self, x: int) -> None:  # pyqtgraph's name
        # The room the axis asks of the layout: the turned names' length, not one line's height.
        super()._updateMaxTextSize(math.ceil(self._extent) if self._names else x)

    def generateDrawSpecs(self, p: QPainter) -> Any:  # pyqtgraph's name
        self._plan()
        return super().generateDrawSpecs(p)

    def drawPicture(self, p: QPainter, axisSpec: Any, tickSpecs: Any, textSpecs: Any) -> None:
        if not self._names:
            super().drawPicture(p, axisSpec, tickSpecs, textSpecs)
            return
        super().drawPicture(p, axisSpec, tickSpecs, [])
        if self.style["tickFont"] is not None:
            p.setFont(self.style["tickFont"])
        p.setPen(self.textPen())
        bounds = self.mapRectFromParent(self.geometry())
        top = bounds.top() + max(0, self.style["tickLength"]) + self.style["tickTextOffset"][1]
        line = self._metrics().height()
        for x, text in self._placed:
            if self.upright:
                p.save()
                p.translate(x, top)
                p.rotate(-90)  # read bottom to top, the name ending at its tick
                right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                p.drawText(QRectF(-self._extent - 2, -line / 2, self._extent + 2, line), int(right), text)
                p.restore()
            else:
                width = self._metrics().horizontalAdvance(text) + 2
                centre = Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop
                p.drawText(QRectF(x - width / 2, top, width, line), int(centre), text)
        self.labels = [text for _x, text in self._placed]
