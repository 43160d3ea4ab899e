"""The streaming status lines relayout nothing when their text changes and their height does not
(issue 32: a word-wrapped QLabel relaid out and repainted the whole window per streamed batch)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

from sqale_desktop.ui.status_text import StatusText
from tests.helpers import shared_data
from tests.ui.windows import WindowFactory, open_page, settle


class Counter(QObject):
    """Counts layout requests and the paints that cover (nearly) the whole window."""

    def __init__(self, window: Any) -> None:
        super().__init__()
        self.window = window
        self.layouts = 0
        self.whole_paints = 0

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:
            self.layouts += 1
        if event.type() == QEvent.Type.Paint and obj is self.window:
            box = event.region().boundingRect()  # type: ignore[attr-defined]
            if box.width() * box.height() >= 0.5 * self.window.width() * self.window.height():
                self.whole_paints += 1
        return False


def progress_texts(count: int) -> list[str]:
    """What the live line says batch after batch: the same length, other figures."""
    return [f"5 tool turns left · {10 + i % 80}.{i % 10} tok/s · {i // 10}.{i % 10} s" for i in range(count)]


def test_the_live_lines_change_without_a_relayout_or_a_whole_window_repaint(
    qtbot: Any, make_window: WindowFactory
) -> None:
    window = make_window()
    page = open_page(qtbot, window, shared_data("sample/chinook.sqlite"))
    live = page.chat.live
    assert isinstance(live, StatusText)
    live.setText("the agent is starting")
    settle()
    counter = Counter(window)
    QApplication.instance().installEventFilter(counter)  # type: ignore[union-attr]
    try:
        for text in progress_texts(40):
            live.setText(text)
            settle()
    finally:
        QApplication.instance().removeEventFilter(counter)  # type: ignore[union-attr]
    assert live.text() == progress_texts(40)[-1]
    assert counter.layouts == 0, counter.layouts
    assert counter.whole_paints == 0, counter.whole_paints


def test_a_line_that_needs_more_room_asks_for_it_and_never_widens_its_pane(qtbot: Any) -> None:
    from PySide6.QtWidgets import QVBoxLayout, QWidget

    pane = QWidget()
    qtbot.addWidget(pane)
    layout = QVBoxLayout(pane)
    line = StatusText("", pane)
    layout.addWidget(line)
    layout.addStretch(1)
    pane.resize(300, 200)
    pane.show()
    qtbot.waitExposed(pane)
    line.setText("Stopped.")
    settle()
    one_line = line.height()
    assert one_line >= line.fontMetrics().height()
    width_before = pane.sizeHint().width()
    line.setText("a reason " * 40)  # many lines at 300 px
    settle()
    assert line.height() >= 3 * one_line
    assert pane.sizeHint().width() == width_before and pane.width() == 300
    line.setText("")
    settle()
    assert line.height() == 0
