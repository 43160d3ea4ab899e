"""Cards fit their content: measured geometry, and screenshots at 1024×700 and full width, in the
light and the dark palette (tests/artifacts/cards_*.png)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication, QLabel, QPlainTextEdit

from sqale_desktop.ui.main_window import MainWindow
from sqale_desktop.ui.palette import apply_theme
from tests.ui.replay_scripts import CHINOOK_ANSWER_SQL, call, turn
from tests.ui.windows import WindowFactory, ask, open_page, settle

LONG_SQL = (
    "SELECT ar.Name AS artist_name, al.Title AS album_title, t.Name AS track_name, g.Name AS genre_name, "
    "t.Milliseconds / 60000.0 AS minutes, t.UnitPrice FROM Track t JOIN Album al ON al.AlbumId = t.AlbumId "
    "JOIN Artist ar ON ar.ArtistId = al.ArtistId JOIN Genre g ON g.GenreId = t.GenreId "
    "WHERE t.Milliseconds > 300000 AND g.Name IN ('Rock', 'Metal', 'Jazz') ORDER BY minutes DESC LIMIT 20"
)
PARAGRAPH = " ".join(
    ["The albums table links artists to their records, so counting albums per artist needs a join."] * 12
)


def script() -> list[str]:
    return [
        # A call the parser cannot read (the old "()" card) and a tool that does not exist.
        turn("Let me look.", '{"tool": "describe_table", "args": {"table_name": }', call("drop_everything")),
        # One long paragraph of thinking (one block, many wrapped lines) and a long query.
        turn(PARAGRAPH, call("run_query", sql=LONG_SQL)),
        turn("Good.", call("submit_sql", sql=CHINOOK_ANSWER_SQL)),
    ]


def visual_lines(edit: QPlainTextEdit) -> int:
    return max(1, math.ceil(edit.document().documentLayout().documentSize().height()))


def assert_fits(edit: QPlainTextEdit, max_lines: int) -> None:
    """As tall as its wrapped lines up to ``max_lines``; no sideways scrolling; a vertical bar
    only when the text really is longer than the box."""
    lines = visual_lines(edit)
    shown = edit.viewport().height() / edit.fontMetrics().lineSpacing()
    assert shown >= min(lines, max_lines) - 0.01, (lines, shown)
    assert shown < min(lines, max_lines) + 1, (lines, shown)  # and not taller than that
    assert not edit.horizontalScrollBar().isVisible()
    assert edit.verticalScrollBar().isVisible() == (lines > max_lines)


def assert_label_whole(label: QLabel) -> None:
    """As tall as its wrapped text needs, once the layout has settled (waits up to 2 s in case
    Qt needs more event-loop passes than ``settle`` gives, then asserts)."""
    deadline = time.monotonic() + 2.0
    while label.height() < label.heightForWidth(label.width()) - 1 and time.monotonic() < deadline:
        QApplication.sendPostedEvents()
        QApplication.processEvents()
        time.sleep(0.01)
    assert label.height() >= label.heightForWidth(label.width()) - 1


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_cards_size_to_their_content_narrow_and_wide(
    qtbot: Any, make_window: WindowFactory, chinook: Path, artifacts: Path, theme: str, themed: None
) -> None:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app, theme)  # type: ignore[arg-type]
    window: MainWindow = make_window(script())
    page = open_page(qtbot, window, chinook)
    page.chat.add_rerun(LONG_SQL, 20, None)
    with qtbot.waitSignal(window.episode_finished, timeout=20_000):
        view = ask(qtbot, window, page)
    unreadable, unknown, query, submitted = view.tool_cards()
    assert unreadable.title.text() == "<b>Unreadable tool call</b>" and "()" not in unreadable.title.text()
    assert not unreadable.ok and isinstance(unreadable.result_view, QLabel)
    assert unknown.title.text().startswith("<b>drop") and "()" not in unknown.title.text()
    rerun = page.chat.reruns[0]
    rerun_sql = rerun.findChild(QPlainTextEdit)
    assert rerun_sql is not None
    thinking = view.turns[2].thinking

    for width, height in ((1024, 700), (1920, 1080)):
        window.resize(width, height)
        settle()
        # Nothing in the conversation is wider than the pane (no hidden sideways overflow).
        viewport = page.chat.scroll_area.viewport().width()
        assert page.chat.scroll_area.widget().width() <= viewport
        for card in (unreadable, unknown, query, submitted):
            assert card.width() <= viewport
            assert_label_whole(card.title)
        assert isinstance(unreadable.result_view, QLabel)
        assert_label_whole(unreadable.result_view)
        assert_fits(rerun_sql, 8)
        assert view.answer is not None and view.answer.editor is not None
        assert_fits(view.answer.editor, 16)
        for turn_view in view.turns.values():
            assert_label_whole(turn_view.header)
        thinking.set_expanded(True)
        settle()
        assert_fits(thinking.text, thinking.MAX_LINES)
        assert visual_lines(thinking.text) > 1  # the paragraph wraps; the box shows the wrapped lines
        window.grab().save(str(artifacts / f"cards_{theme}_{width}x{height}.png"))
        thinking.set_expanded(False)


def test_a_turn_header_wraps_in_a_narrow_pane(qtbot: Any, make_window: WindowFactory, chinook: Path) -> None:
    window = make_window(script())
    page = open_page(qtbot, window, chinook)
    with qtbot.waitSignal(window.episode_finished, timeout=20_000):
        view = ask(qtbot, window, page)
    window.resize(1024, 700)
    splitter = page.findChild(type(page.chat.parentWidget()))
    assert splitter is not None
    splitter.setSizes([520, 170, 334])  # a narrow chat pane
    # The measured tok/s has as many digits as the machine is fast, so the header's length would
    # decide the test: a summary as long as a speculating turn's, fixed, makes it need two lines.
    view.turns[1].finish("36 tokens, 12.3 tok/s, 40/52 drafted kept")
    settle()
    header = view.turns[1].header
    one_line = header.fontMetrics().lineSpacing()
    # It needs two lines here (waiting, as assert_label_whole does, for the narrower width)…
    qtbot.waitUntil(lambda: header.heightForWidth(header.width()) > one_line, timeout=2_000)
    assert_label_whole(header)  # …and gets them


def test_the_live_thinking_box_of_a_later_turn_shows_its_wrapped_lines(
    qtbot: Any, make_window: WindowFactory, chinook: Path, artifacts: Path
) -> None:
    """The box once shrank to one line in turn 2: one long paragraph is one block."""
    window = make_window(script()[1:], delay=0.05)  # turn 1 is the long paragraph; ~10 s of streaming
    page = open_page(qtbot, window, chinook)
    window.resize(1024, 700)
    view = ask(qtbot, window, page)
    qtbot.waitUntil(
        lambda: 1 in view.turns and len(view.turns[1].thinking.plain_text()) > 500, timeout=20_000
    )
    settle()
    box = view.turns[1].thinking
    assert view.turns[1].summary == "" and box.expanded  # still streaming
    assert visual_lines(box.text) > 3
    assert_fits(box.text, box.MAX_LINES)
    window.grab().save(str(artifacts / "thinking_live_1024x700.png"))
    with qtbot.waitSignal(window.episode_finished, timeout=20_000):
        window.stop(page)


LONG_NAMES_SQL = (
    "SELECT ar.Name AS artist, al.Title AS album, count(*) AS tracks, sum(t.Milliseconds) / 1000 AS seconds "
    "FROM Track t JOIN Album al USING (AlbumId) JOIN Artist ar USING (ArtistId) "
    "GROUP BY al.AlbumId ORDER BY length(ar.Name) + length(al.Title) DESC LIMIT 5"
)


def test_numbers_in_the_cards_tables_stay_whole_in_a_narrow_window(
    qtbot: Any, make_window: WindowFactory, chinook: Path, artifacts: Path
) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QTableView

    # Long artist names and album titles beside two numbers (issue 20: the numbers were cut off).
    window: MainWindow = make_window(
        [
            turn("Count the tracks.", call("run_query", sql=LONG_NAMES_SQL)),
            turn("Done.", call("submit_sql", sql=LONG_NAMES_SQL)),
        ]
    )
    window.resize(1024, 700)
    page = open_page(qtbot, window, chinook)
    view = ask(qtbot, window, page)
    with qtbot.waitSignal(window.episode_finished, timeout=20_000):
        pass
    settle()
    tables = [t for card in view.tool_cards() for t in card.findChildren(QTableView)]
    assert len(tables) == 2
    for table in tables:
        model, header = table.model(), table.horizontalHeader()
        room = table.viewport().width()
        assert model.columnCount() == 4
        for column in (2, 3):  # tracks, seconds: whole, inside the card
            needed = table.sizeHintForColumn(column)
            left = header.sectionViewportPosition(column)
            assert header.sectionSize(column) >= needed, (column, header.sectionSize(column), needed)
            assert left >= 0 and left + header.sectionSize(column) <= room, (column, left, room)
        # The text gave way, elided, and says the whole of itself in a tooltip.
        name = model.index(0, 0)
        assert header.sectionSize(0) < table.sizeHintForColumn(0)
        assert model.data(name, Qt.ItemDataRole.ToolTipRole) == model.data(name)
    window.grab().save(str(artifacts / "cards_tables_1024x700.png"))
