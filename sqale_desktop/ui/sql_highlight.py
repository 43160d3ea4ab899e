"""SQL syntax highlighting and formatting, both through sqlparse's lexer.

Using sqlparse for both means the colours agree with how the formatter reads the text.  The
formatter upper-cases fewer words than the highlighter colours: sqlparse calls ``first`` or
``year`` keywords, and only SQLite's reserved words are upper-cased (see ``core.sql_layout``).
"""

from __future__ import annotations

import sqlparse
from PySide6.QtGui import QColor, QFont, QGuiApplication, QSyntaxHighlighter, QTextCharFormat, QTextDocument
from sqlparse import tokens as T

from sqale_desktop.core import sql_layout


def format_sql(sql: str) -> str:
    """The house format (:func:`sqale_desktop.core.sql_layout.format_sql`): keywords upper case,
    one clause a line, and what the query returns unchanged."""
    return sql_layout.format_sql(sql)


def _is_dark() -> bool:
    app = QGuiApplication.instance()
    if not isinstance(app, QGuiApplication):
        return False
    return app.palette().base().color().lightness() < 128


def _formats(dark: bool) -> dict[str, QTextCharFormat]:
    colours = {
        "keyword": "#7fb4ff" if dark else "#0033b3",
        "name": "#e0c080" if dark else "#7a3e00",
        "string": "#9fd28a" if dark else "#067d17",
        "number": "#f4a0d0" if dark else "#1750eb",
        "comment": "#8a8a8a",
        "operator": "#c0c0c0" if dark else "#555555",
    }
    result = {}
    for kind, colour in colours.items():
        fmt = QTextCharFormat()
        fmt.setForeground(QColor(colour))
        if kind == "keyword":
            fmt.setFontWeight(QFont.Weight.Bold)
        if kind == "comment":
            fmt.setFontItalic(True)
        result[kind] = fmt
    return result


def _kind(ttype: object) -> str | None:
    if ttype in T.Keyword or ttype in T.Name.Builtin:
        return "keyword"
    if ttype in T.Literal.String.Symbol:  # "quoted identifier"
        return "name"
    if ttype in T.Literal.String:
        return "string"
    if ttype in T.Literal.Number:
        return "number"
    if ttype in T.Comment:
        return "comment"
    if ttype in T.Operator or ttype in T.Punctuation:
        return "operator"
    return None


class SqlHighlighter(QSyntaxHighlighter):
    """Colours SQL line by line with sqlparse's lexer; follows the palette (light or dark)."""

    def __init__(self, document: QTextDocument) -> None:
        super().__init__(document)
        self._formats = _formats(_is_dark())

    def refresh_palette(self) -> None:
        self._formats = _formats(_is_dark())
        self.rehighlight()

    def highlightBlock(self, text: str) -> None:
        position = 0
        for ttype, value in sqlparse.lexer.tokenize(text):  # type: ignore[no-untyped-call]
            length = len(value.encode("utf-16-le")) // 2  # Qt counts UTF-16 code units
            kind = _kind(ttype)
            if kind is not None:
                self.setFormat(position, length, self._formats[kind])
            position += length
