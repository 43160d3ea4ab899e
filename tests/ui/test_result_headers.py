"""The result grid's column titles as painted (issue 32 item 12): whole where the column has room,
cut at their end with the whole name in a tooltip where it has not; never cut at both ends.

The titles are those of a real file with long Italian headers (ISTAT's list of municipalities,
frictionless-py issue 811), imported as the app imports it, and the query is run with the Run
button.  What the header paints is read from its style: every title goes through ``drawItemText``
with the rectangle it is drawn in and the painter's font (bold on a column with a selected cell).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QEvent, QPoint, QRect, Qt
from PySide6.QtGui import QFont, QFontMetrics, QHelpEvent, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QHeaderView, QProxyStyle, QToolTip

from sqale_desktop.ui.result_grid import ResultGrid
from sqale_desktop.ui.sql_panel import SqlPanel
from tests.helpers import shared_data
from tests.ui.sql_panels import shown_panel

ISTAT = "files/csv/frictionless__issue-811.csv"


@dataclass
class Painted:
    text: str
    rect: QRect
    font: QFont  # the painter's

    def width(self, text: str | None = None) -> int:
        return QFontMetrics(self.font).horizontalAdvance(self.text if text is None else text)


class RecordingStyle(QProxyStyle):
    """The application's style, noting each text it draws."""

    def __init__(self) -> None:
        super().__init__()
        self.painted: list[Painted] = []

    def drawItemText(
        self,
        painter: QPainter,
        rect: QRect,
        flags: int,
        palette: QPalette,
        enabled: bool,
        text: str,
        role: QPalette.ColorRole = QPalette.ColorRole.NoRole,
    ) -> None:
        self.painted.append(Painted(text, QRect(rect), QFont(painter.font())))
        super().drawItemText(painter, rect, flags, palette, enabled, text, role)


@pytest.fixture
def istat_panel(qtbot: Any) -> Iterator[SqlPanel]:
    from sqale_desktop.core.imports import import_source

    database = import_source(shared_data(ISTAT)).db_path
    with shown_panel(qtbot, database, (1200, 700)) as panel:
        yield panel


def run_by_click(qtbot: Any, panel: SqlPanel, sql: str) -> None:
    panel.editor.set_sql(sql)
    with qtbot.waitSignal(panel.query_finished, timeout=60_000):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)


def painted_titles(qtbot: Any, grid: ResultGrid, style: RecordingStyle) -> dict[int, Painted]:
    """Each column's title as the header paints it, its rectangle from the section's left edge
    (wherever the viewport cuts the section), the grid scrolled to bring each in sight."""
    header = grid.horizontalHeader()
    titles: dict[int, Painted] = {}
    for column in range(header.count()):
        if column in titles:
            continue
        grid.scrollTo(grid.model().index(0, column))
        style.painted.clear()
        header.viewport().repaint()
        for painted in style.painted:
            section = header.logicalIndexAt(painted.rect.center())
            painted.rect.translate(-header.sectionViewportPosition(section), 0)
            titles[section] = painted
    return titles


def check_titles(grid: ResultGrid, titles: dict[int, Painted]) -> tuple[list[str], list[str]]:
    """Every title fits the rectangle it is painted in, inside its section: whole when it has room
    (always when the section is as wide as the header asks), else cut at its end.  Returns the
    names shown whole and those cut."""
    header = grid.horizontalHeader()
    names = grid.column_names()
    assert sorted(titles) == list(range(len(names)))
    whole, cut = [], []
    for column, painted in titles.items():
        name = names[column]
        assert painted.rect.left() >= 0 and painted.rect.right() < header.sectionSize(column)
        assert painted.width() <= painted.rect.width(), (name, painted)  # not cut at both ends
        if painted.width(name) <= painted.rect.width():
            assert painted.text == name, (name, painted)
            whole.append(name)
        else:
            assert header.sectionSize(column) < header.sectionSizeHint(column), (name, painted)
            assert painted.text.endswith("…") and name.startswith(painted.text[:-1]), (name, painted)
            cut.append(name)
    return whole, cut


def test_titles_are_whole_where_there_is_room_and_cut_at_one_end_where_not(
    qtbot: Any, istat_panel: SqlPanel, artifacts: Path
) -> None:
    panel = istat_panel
    run_by_click(qtbot, panel, 'SELECT * FROM "frictionless__issue-811"')
    grid = panel.grid
    header = grid.horizontalHeader()
    assert header.count() == 26
    style = RecordingStyle()
    header.setStyle(style)
    try:
        whole, cut = check_titles(grid, painted_titles(qtbot, grid, style))
        assert len(whole) == 20 and "Denominazione (Italiana e straniera)" in whole
        assert len(cut) == 6 and "Codice Comune numerico con 110 province (dal 2010 al 2016)" in cut

        # A click on a title sorts by it (its arrow takes room from the title); Ctrl+A selects
        # every cell, which makes every title bold (wider).  The same titles stay whole.
        column = grid.column_names().index("Denominazione in italiano")
        grid.scrollTo(grid.model().index(0, column))
        with qtbot.waitSignal(panel.query_finished, timeout=60_000):  # not all loaded: re-run sorted
            qtbot.mouseClick(
                header.viewport(),
                Qt.MouseButton.LeftButton,
                pos=QPoint(header.sectionViewportPosition(column) + 5, header.height() // 2),
            )
        assert header.sortIndicatorSection() == column
        grid.setFocus()
        qtbot.keyClick(grid, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
        titles = painted_titles(qtbot, grid, style)
        assert all(painted.font.bold() for painted in titles.values())
        assert check_titles(grid, titles) == (whole, cut)
        grid.scrollTo(grid.model().index(0, column))
        grid.grab().save(str(artifacts / "result_headers_istat.png"))
    finally:
        header.setStyle(None)  # type: ignore[arg-type]


# A tooltip raises its window; the offscreen plugin cannot, and says so.
@pytest.mark.qt_log_ignore(
    "This plugin does not support raise",
    "This plugin does not support propagateSizeHints",  # the conftest's note: this marker replaces it
)
def test_a_cut_title_has_the_whole_name_in_its_tooltip(qtbot: Any, istat_panel: SqlPanel) -> None:
    """The help event is the one the system sends when the pointer rests on a title."""
    panel = istat_panel
    run_by_click(qtbot, panel, 'SELECT * FROM "frictionless__issue-811"')
    grid = panel.grid
    header: QHeaderView = grid.horizontalHeader()
    names = grid.column_names()

    def hover(column: int) -> str | None:
        grid.scrollTo(grid.model().index(0, column))
        middle = header.sectionViewportPosition(column) + header.sectionSize(column) // 2
        spot = QPoint(middle, header.height() // 2)
        event = QHelpEvent(QEvent.Type.ToolTip, spot, header.viewport().mapToGlobal(spot))
        QApplication.sendEvent(header.viewport(), event)
        return QToolTip.text() if QToolTip.isVisible() else None

    assert hover(names.index("Codice Regione")) is None  # shown whole: nothing to add
    cut = names.index("Flag Comune capoluogo di provincia/città metropolitana/libero consorzio")
    assert hover(cut) == names[cut]
