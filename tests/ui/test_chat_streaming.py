"""What the chat does per streamed batch and per tool card stays small (issue 32: the worst stall
while an episode streams): a tool result's table is a C++ model that Python only fills, a full
thinking box takes more text without a relayout, and a card relays out the chat, not the window."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QApplication, QTableView

from sqale_desktop.core.agent.events import TextDelta, ToolCalled, ToolResulted, TurnStarted
from sqale_desktop.core.tools.payloads import RowsPayload
from sqale_desktop.ui.chat_pane import ChatPane
from sqale_desktop.ui.chat_widgets import MAX_CARD_ROWS
from sqale_desktop.ui.result_model import ResultTableModel
from tests.helpers import shared_data
from tests.ui.windows import WindowFactory, open_page, settle

WORDS = "The question needs the regions with the highest sales, so I compare totals. "


class LayoutCounter(QObject):
    """Counts layout requests by the class of the widget they go to."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[str] = []

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # Qt's name
        if event.type() == QEvent.Type.LayoutRequest:
            self.requests.append(type(obj).__name__)
        return False


def counting(action: Any) -> list[str]:
    """The layout requests that ``action`` and the events it posted caused."""
    app = QApplication.instance()
    assert app is not None
    counter = LayoutCounter()
    app.installEventFilter(counter)
    try:
        action()
        settle()
    finally:
        app.removeEventFilter(counter)
    return counter.requests


def region_rows(count: int) -> RowsPayload:
    rows = [(f"region {i}", 117_000 + i, 50.25 + i, "x" if i % 5 else None, b"\x00") for i in range(count)]
    return RowsPayload(["region", "count(*)", "avg", "note", "blob"], rows, count, False)


def card_table(view: Any) -> QTableView:
    card = view.tool_cards()[-1]
    table = card.result_view.findChild(QTableView) if card.result_view is not None else None
    assert isinstance(table, QTableView)
    return table


def test_a_result_cards_table_is_a_cpp_model_with_the_grids_look(qtbot: Any, qtmodeltester: Any) -> None:
    """The card's rows live in a plain QStandardItemModel: laying out and painting the chat (every
    card on screen, each time a card arrives) never calls into Python for a cell."""
    pane = ChatPane()
    qtbot.addWidget(pane)
    pane.resize(900, 900)
    pane.show()
    view = pane.begin("Which regions sell the most?")
    rows = region_rows(40)
    pane.apply(
        [
            TurnStarted(1, False, 6),
            ToolCalled(1, 0, "run_query", {"sql": "SELECT …"}),
            ToolResulted(1, 0, "run_query", "text the model saw", True, 0.2, rows),
        ]
    )
    settle()
    table = card_table(view)
    model = table.model()
    assert type(model) is QStandardItemModel  # not a Python subclass: no data() in Python
    qtmodeltester.check(model)
    assert model.rowCount() == MAX_CARD_ROWS and model.columnCount() == 5
    assert [model.headerData(c, Qt.Orientation.Horizontal) for c in range(5)] == rows.columns
    grid = ResultTableModel(first_rows=rows.rows, columns=rows.columns)
    looks = [
        Qt.ItemDataRole.DisplayRole,
        Qt.ItemDataRole.ForegroundRole,
        Qt.ItemDataRole.FontRole,
        Qt.ItemDataRole.TextAlignmentRole,
    ]
    for row in range(MAX_CARD_ROWS):
        for column in range(5):
            card_cell, grid_cell = model.index(row, column), grid.index(row, column)
            for role in looks:  # a value looks the same in the card and in the grid
                assert model.data(card_cell, role) == grid.data(grid_cell, role), (row, column, role)
            assert model.data(card_cell, Qt.ItemDataRole.ToolTipRole) == model.data(card_cell)
    assert model.data(model.index(0, 3)) == "NULL"
    assert table.horizontalHeader().sectionSize(1) >= table.sizeHintForColumn(1)  # numbers whole


def test_a_full_thinking_box_takes_more_text_without_a_relayout(qtbot: Any) -> None:
    pane = ChatPane()
    qtbot.addWidget(pane)
    pane.resize(700, 900)
    pane.show()
    view = pane.begin("Which regions sell the most?")
    pane.apply([TurnStarted(1, False, 6)])
    for _ in range(8):  # past the box's twelve lines: from here on it only scrolls
        pane.apply([TextDelta(1, WORDS * 4, "think")])
        settle()
    box = view.turns[1].thinking
    height = box.text.height()

    def stream() -> None:
        for _ in range(30):
            pane.apply([TextDelta(1, WORDS, "think")])
            settle()

    requests = counting(stream)
    assert requests == [], requests
    assert box.text.height() == height
    assert box.toggle.text() == f"Thinking ({len(box.plain_text()):,} characters)"
    # The label still fits when it gains a digit (the toggle is fixed at its size hint then).
    pane.apply([TextDelta(1, WORDS * 200, "think")])
    settle()
    assert box.toggle.width() >= box.toggle.sizeHint().width()


def test_a_tool_card_relays_out_the_chat_not_the_window(qtbot: Any, make_window: WindowFactory) -> None:
    window = make_window()
    page = open_page(qtbot, window, shared_data("sample/chinook.sqlite"))
    chat = page.chat
    view = chat.begin("Which regions sell the most?")
    chat.apply([TurnStarted(1, False, 6), TextDelta(1, WORDS, "think")])
    settle()

    def add_cards() -> None:
        for index in range(3):
            chat.apply([ToolCalled(1, index, "run_query", {"sql": "SELECT …"})])
            settle()
            chat.apply([ToolResulted(1, index, "run_query", "text", True, 0.2, region_rows(17))])
            settle()

    requests = counting(add_cards)
    assert len(view.tool_cards()) == 3
    assert requests, "the chat made room for the cards"
    top_level = {type(widget).__name__ for widget in QApplication.topLevelWidgets()} - {"QWidget"}
    assert not top_level & set(requests), requests
