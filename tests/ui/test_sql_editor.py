"""The SQL editor: highlighting never fails on odd text, Format reformats, Ctrl+Enter asks to run."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from PySide6.QtCore import Qt

from sqale_desktop.ui.sql_editor import SqlEditor
from sqale_desktop.ui.sql_highlight import format_sql


@given(st.text(max_size=300))
@settings(max_examples=80, deadline=None)
def test_any_text_highlights_and_formats(qapp: Any, text: str) -> None:
    editor = SqlEditor()
    editor.set_sql(text)  # highlightBlock runs for every block; an exception there fails the test
    assert editor.document().blockCount() >= 1
    assert isinstance(format_sql(text), str)
    editor.deleteLater()


def test_keywords_get_a_colour_of_their_own(qtbot: Any) -> None:
    editor = SqlEditor()
    qtbot.addWidget(editor)
    editor.set_sql("SELECT name FROM t WHERE x = 'a' -- note")
    block = editor.document().firstBlock()
    ranges = {
        r.start: (r.length, r.format.fontWeight(), r.format.foreground().color().name())
        for r in block.layout().formats()
    }
    keyword_length, keyword_weight, keyword_colour = ranges[0]
    assert keyword_length == 6 and keyword_weight > 400
    string_colour = ranges[29][2]  # 'a'
    comment_colour = ranges[33][2]  # -- note
    assert len({keyword_colour, string_colour, comment_colour}) == 3


def test_format_and_run_shortcut(qtbot: Any) -> None:
    editor = SqlEditor()
    qtbot.addWidget(editor)
    editor.set_sql("select a,b from t where a=1 order by b")
    editor.format()
    assert editor.sql() == "SELECT a,\n       b\nFROM t\nWHERE a=1\nORDER BY b"
    editor.document().undo()
    assert editor.sql() == "select a,b from t where a=1 order by b"  # one undoable edit
    with qtbot.waitSignal(editor.run_requested):
        qtbot.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert editor.sql() == "select a,b from t where a=1 order by b"  # Ctrl+Enter did not insert a line
