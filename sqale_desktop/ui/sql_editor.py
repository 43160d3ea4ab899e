"""A plain-text SQL editor: monospace, highlighted, Ctrl+Enter to run."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from sqale_desktop.ui.sql_highlight import SqlHighlighter, format_sql


def monospace_font_point_size() -> int:
    return max(9, QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).pointSize())


class SqlEditor(QPlainTextEdit):
    """Editable SQL with highlighting.

    Signals:
        run_requested(): Ctrl+Enter (or Ctrl+Return) was pressed.
    """

    run_requested = Signal()

    def __init__(self, parent: QWidget | None = None, read_only: bool = False) -> None:
        super().__init__(parent)
        self.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setTabStopDistance(self.fontMetrics().horizontalAdvance(" ") * 2)
        self.setReadOnly(read_only)
        self.setPlaceholderText("SELECT …   (Ctrl+Enter runs)")
        self.highlighter = SqlHighlighter(self.document())

    def sql(self) -> str:
        return self.toPlainText()

    def set_sql(self, sql: str) -> None:
        self.setPlainText(sql)

    def format(self) -> None:
        """Reformat through sqlparse, as one undoable edit."""
        text = self.toPlainText()
        if not text.strip():
            return
        cursor = self.textCursor()
        cursor.select(cursor.SelectionType.Document)
        cursor.insertText(format_sql(text))

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.run_requested.emit()
            event.accept()
            return
        super().keyPressEvent(event)
