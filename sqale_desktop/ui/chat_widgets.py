"""The pieces of one episode in the chat: thinking text, tool cards, the answer card.

Widget count stays bounded: one text widget per turn receives every text delta by appending at the
end (never one widget per delta), one card per tool call (a turn holds a handful), one answer card
per episode.  Tool results are rendered for people from the structured payload when there is one
(a table for rows, the CREATE statement highlighted, the join path as a chain) and fall back to
the text the model saw.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QEvent, QObject, QSizeF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QFontDatabase,
    QStandardItem,
    QStandardItemModel,
    QTextCharFormat,
    QTextCursor,
    QTextOption,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop.core.tools.payloads import (
    DDLPayload,
    ForeignKeysPayload,
    JoinPathPayload,
    RowsPayload,
    SubmittedPayload,
    TablesPayload,
)
from sqale_desktop.ui.result_model import ReadOnlyTableModel, display_value
from sqale_desktop.ui.sql_editor import SqlEditor
from sqale_desktop.ui.sql_highlight import format_sql

_BINARY = (bytes, bytearray, memoryview)
MAX_CARD_ROWS = 12
MAX_CARD_COLUMN_PX = 220
MIN_CARD_COLUMN_PX = 56
"""A text column of a card's table is narrowed down to this (elided, the tooltip has the whole
value) before a numeric column leaves the card's width."""
ENDED_BY_TEXT = {
    "submit_sql": "submitted by the model",
    "final_turn": "answered in the final turn",
    "fallback_to_last_working_query": "fell back to the last query that ran",
    "no_answer": "no answer",
    "cancelled": "stopped",
    "error": "failed",
}
ANSWER_HEADINGS = {
    "no_answer": "No answer",
    "cancelled": "Stopped",
    "error": "Failed",
}
"""Card headings where there is no answer to show; every other ``ended_by`` is an "Answer"."""
ENDED_BY_STATUS = {
    "submit_sql": "Answer ready: submitted by the model.",
    "final_turn": "Answer ready: written in the final turn.",
    "fallback_to_last_working_query": (
        "Answer ready: the model's answer failed, so the last query that ran is shown."
    ),
    "no_answer": "No answer: the model gave no query that runs.",
    "cancelled": "Stopped.",
    "error": "The episode failed.",
}
"""The status bar's sentence for each ``ended_by``; the answer card says the same in its heading."""
NO_CALL_NOTE = "The model wrote no tool call; it was told so, and the turn counted."


def ended_by_status(ended_by: str) -> str:
    """One place for the status-bar text of an outcome, so the card and the bar never disagree."""
    return ENDED_BY_STATUS.get(ended_by, f"Ended: {ended_by}.")


def answer_heading(ended_by: str) -> str:
    """The answer card's heading (rich text): "Answer — submitted by the model", "Stopped", …"""
    title = ANSWER_HEADINGS.get(ended_by)
    if title is not None:
        return f"<b>{title}</b>"
    return f"<b>Answer</b> — {ENDED_BY_TEXT.get(ended_by, _escape(ended_by))}"


def cut_note(tokens: int) -> str:
    return f"Cut off at its {tokens:,}-token budget: the model was still writing."


def _card_frame(widget: QFrame, name: str) -> None:
    widget.setObjectName(name)
    widget.setFrameShape(QFrame.Shape.StyledPanel)
    widget.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)


class _HeightFitter(QObject):
    """Keeps a text edit as tall as its wrapped lines, up to ``max_lines``.

    Counting blocks (paragraphs) is not enough: one long SQL line or one paragraph of thinking
    wraps into many visual lines, and a box one block high then shows half a line between two
    scroll bars.  The document layout of a ``QPlainTextEdit`` is lazy (blocks it has not laid out
    count as one line), so the wrapped lines are measured here with the font, block by block,
    stopping once ``max_lines`` is exceeded; this runs when the text changes and when the width
    does.
    """

    def __init__(self, edit: QPlainTextEdit, max_lines: int, appends_only: bool = False) -> None:
        super().__init__(edit)
        self.edit = edit
        self.max_lines = max_lines
        self.appends_only = appends_only
        """The text only ever grows at its end (a streaming turn): once it is past ``max_lines`` at
        a width, later text cannot bring it back under, so it is not measured again until the width
        changes (measuring is a layout of the whole paragraph, per streamed batch)."""
        self._full_at: tuple[int, int] | None = None
        edit.document().documentLayout().documentSizeChanged.connect(self.refit)
        edit.installEventFilter(self)
        self._width = -1
        self._pending = False
        self.refit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt's name
        if (
            event.type() in (QEvent.Type.Resize, QEvent.Type.Show)
            and watched is self.edit
            and self.edit.width() != self._width
            and not self._pending
        ):
            # After the edit's own resizeEvent, which is what resizes its viewport.
            self._pending = True
            QTimer.singleShot(0, self, self._deferred)
        return False

    def _deferred(self) -> None:
        self._pending = False
        self.refit()

    def visual_lines(self, limit: int) -> int:
        """Wrapped lines of the text at the current width, counted up to ``limit + 1``."""
        edit = self.edit
        doc = edit.document()
        if edit.lineWrapMode() == QPlainTextEdit.LineWrapMode.NoWrap:
            return max(1, doc.blockCount())
        metrics = edit.fontMetrics()
        width = edit.viewport().width() - math.ceil(2 * doc.documentMargin())
        if width <= 0:
            return 1
        spacing = metrics.lineSpacing()
        flags = int(Qt.TextFlag.TextWordWrap.value) | int(Qt.TextFlag.TextWrapAnywhere.value)
        lines = 0
        block = doc.begin()
        while block.isValid() and lines <= limit:
            text = block.text()
            if text:
                rect = metrics.boundingRect(0, 0, width, spacing * (limit + 2), flags, text)
                lines += max(1, math.ceil(rect.height() / spacing))
            else:
                lines += 1
            block = block.next()
        # The layout's own count is exact for the blocks it has laid out (and never more than the
        # truth), so the larger of the two is the better figure.
        laid_out = math.ceil(doc.documentLayout().documentSize().height())
        return max(1, lines, laid_out)

    def refit(self, _size: QSizeF | None = None) -> None:
        edit = self.edit
        self._width = edit.width()
        key = (edit.viewport().width(), self.max_lines)
        if self.appends_only and key == self._full_at:
            return
        lines = self.visual_lines(self.max_lines)
        self._full_at = key if lines > self.max_lines else None
        shown = min(self.max_lines, lines)
        policy = (
            Qt.ScrollBarPolicy.ScrollBarAsNeeded
            if lines > self.max_lines
            else Qt.ScrollBarPolicy.ScrollBarAlwaysOff
        )
        if policy != edit.verticalScrollBarPolicy():
            edit.setVerticalScrollBarPolicy(policy)
            if not self._pending:  # the bar came or went: the viewport's width, and the wrapping, changed
                self._pending = True
                QTimer.singleShot(0, self, self._deferred)
        margin = 2 * edit.document().documentMargin()
        height = edit.fontMetrics().lineSpacing() * shown + 2 * edit.frameWidth() + math.ceil(margin) + 2
        if edit.lineWrapMode() == QPlainTextEdit.LineWrapMode.NoWrap:
            height += edit.horizontalScrollBar().sizeHint().height()
        if edit.height() != height or edit.minimumHeight() != height:
            edit.setFixedHeight(height)


def _fit_text_height(edit: QPlainTextEdit, max_lines: int) -> None:
    """Size ``edit`` to its content (wrapped lines) within ``max_lines``, now and as it changes."""
    fitter = edit.findChild(_HeightFitter)
    if fitter is None:
        _HeightFitter(edit, max_lines)
    else:
        fitter.max_lines = max_lines
        fitter.refit()


class ThinkingBox(QWidget):
    """A turn's streamed text: thinking in grey italics, the rest plain; collapsible."""

    MAX_LINES = 12

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.toggle = QToolButton(self)
        self.toggle.setCheckable(True)
        self.toggle.setChecked(True)
        self.toggle.setArrowType(Qt.ArrowType.DownArrow)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setAutoRaise(True)
        self.toggle.setStyleSheet("QToolButton { border: none; padding: 1px; }")  # a disclosure, not a button
        self.toggle.toggled.connect(self.set_expanded)
        self.text = QPlainTextEdit(self)
        self.text.setReadOnly(True)
        self.text.setObjectName("thinking")
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.text.setMaximumBlockCount(2000)  # a runaway turn cannot grow the document without bound
        layout.addWidget(self.toggle)
        layout.addWidget(self.text)
        self._think = QTextCharFormat()
        self._think.setFontItalic(True)
        self._think.setForeground(self.palette().placeholderText())
        self._answer = QTextCharFormat()
        self._chars = 0
        self._fitter = _HeightFitter(self.text, self.MAX_LINES, appends_only=True)
        self._label_toggle("Thinking")

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._recolour()
        elif event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self.toggle.setMinimumSize(0, 0)  # another font: the label's room is measured anew
            self._label_toggle(self.toggle.text())

    def _recolour(self) -> None:
        """The thinking's grey is a colour in the text, not a palette role: give the text written
        so far (and what comes next) the new palette's grey."""
        grey = self.palette().placeholderText()
        if grey == self._think.foreground():
            return
        self._think.setForeground(grey)
        recolour = QTextCharFormat()
        recolour.setForeground(grey)
        spans = []  # found first, changed after: changing formats merges fragments under an iterator
        block = self.text.document().begin()
        while block.isValid():
            iterator = block.begin()
            while not iterator.atEnd():
                fragment = iterator.fragment()
                if fragment.charFormat().fontItalic():
                    spans.append((fragment.position(), fragment.position() + fragment.length()))
                iterator += 1
            block = block.next()
        cursor = QTextCursor(self.text.document())
        for start, end in spans:
            cursor.setPosition(start)
            cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(recolour)

    def append(self, text: str, phase: str) -> None:
        if phase == "think":
            # The loop's phase splitter hands the tags over whole, inside think-phase text; they
            # are markup for the model, not words for people.
            text = text.replace("<think>", "").replace("</think>", "")
            if not text:
                return
        cursor = self.text.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text, self._think if phase == "think" else self._answer)
        self._chars += len(text)
        self._label_toggle(f"Thinking ({self._chars:,} characters)")
        self._fitter.refit()
        bar = self.text.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _label_toggle(self, text: str) -> None:
        """Relabel the disclosure without a relayout per streamed batch.

        A button's new text always asks its layout for room (``updateGeometry``), and that
        relayout climbs through the turn and the episode to the chat's scroll area.  A widget of
        fixed size asks nothing, so the toggle is fixed at its size hint and refixed only when the
        label needs more room (the count gained a digit).
        """
        self.toggle.setText(text)
        hint = self.toggle.sizeHint()
        if hint.width() > self.toggle.minimumWidth() or hint.height() != self.toggle.minimumHeight():
            self.toggle.setFixedSize(max(hint.width(), self.toggle.minimumWidth()), hint.height())

    def plain_text(self) -> str:
        return self.text.toPlainText()

    def set_expanded(self, expanded: bool) -> None:
        self.toggle.setChecked(expanded)
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow)
        self.text.setVisible(expanded)

    @property
    def expanded(self) -> bool:
        return self.toggle.isChecked()


class _ColumnFitter(QObject):
    """Keeps a card's table within its width: numbers stay whole, text columns give way.

    Columns are sized to their contents (up to ``MAX_CARD_COLUMN_PX``); in a pane narrower than
    that (a 1024-pixel window) the text columns share what the numeric ones leave, down to
    ``MIN_CARD_COLUMN_PX`` each, and elide: the numeric column was cut off at the card's edge,
    exactly the figure the question asked for.  Only past that does the table scroll sideways.
    """

    def __init__(self, view: QTableView, natural: list[int], numeric: list[bool]) -> None:
        super().__init__(view)
        self.view = view
        self.natural = natural
        self.numeric = numeric
        view.viewport().installEventFilter(self)
        self.fit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt's name
        if event.type() == QEvent.Type.Resize:
            self.fit()
        return False

    def fit(self) -> None:
        room = self.view.viewport().width()
        fixed = sum(w for w, numeric in zip(self.natural, self.numeric, strict=True) if numeric)
        text = [w for w, numeric in zip(self.natural, self.numeric, strict=True) if not numeric]
        cap = MAX_CARD_COLUMN_PX
        if text and fixed + sum(text) > room:
            # The widest text columns give way first: the largest cap under which it all fits.
            caps = range(max(text), MIN_CARD_COLUMN_PX, -2)
            cap = next((c for c in caps if fixed + sum(min(w, c) for w in text) <= room), MIN_CARD_COLUMN_PX)
        header = self.view.horizontalHeader()
        for column, (width, numeric) in enumerate(zip(self.natural, self.numeric, strict=True)):
            wanted = width if numeric else min(width, cap)
            if header.sectionSize(column) != wanted:
                header.resizeSection(column, wanted)


def _rows_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], parent: QWidget) -> QTableView:
    """A small static table over a C++ ``QStandardItemModel``.

    A model in Python answers ``data`` once per role per cell whenever the table is laid out or
    painted, and the chat lays out and paints every card on screen each time a card arrives: a
    Python model made adding a card 2.5 times dearer than this one (issue 32).  Here Python only
    fills it, a row at a time, with the look the result grid has (``ReadOnlyTableModel.cell_look``).
    """
    view = QTableView(parent)
    width = len(columns)
    model = QStandardItemModel(0, width, view)
    model.setHorizontalHeaderLabels([str(c) for c in columns])
    look = ReadOnlyTableModel([])
    role = Qt.ItemDataRole
    grey = look.cell_look(role.ForegroundRole, True, False)
    italic = look.cell_look(role.FontRole, True, False)
    right = Qt.AlignmentFlag(look.cell_look(role.TextAlignmentRole, False, True))
    numeric = [True] * width
    shown = list(rows)[:MAX_CARD_ROWS]
    for row in shown:
        items = []
        for c, value in enumerate(row[:width]):
            text = display_value(value)
            item = QStandardItem(text)
            item.setToolTip(text)  # the whole value when the column is narrowed
            if value is None or isinstance(value, _BINARY):
                item.setForeground(grey)
                item.setFont(italic)
            elif isinstance(value, int | float):
                item.setTextAlignment(right)
            else:
                numeric[c] = False
            items.append(item)
        model.appendRow(items)
    view.setModel(model)
    # Nothing in a card is edited (its items keep Qt's default flags, so no trigger opens an editor).
    view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(view.fontMetrics().height() + 6)
    view.resizeColumnsToContents()
    header = view.horizontalHeader()
    natural = [min(header.sectionSize(column), MAX_CARD_COLUMN_PX) for column in range(width)]
    header.setStretchLastSection(True)
    view.setTextElideMode(Qt.TextElideMode.ElideRight)
    _ColumnFitter(view, natural, numeric)
    row_height = view.verticalHeader().defaultSectionSize()
    # Room for a horizontal scroll bar is kept below the rows: a wide result scrolls sideways
    # without the bar covering its last row.
    bar = view.horizontalScrollBar().sizeHint().height()
    view.setFixedHeight(header.sizeHint().height() + row_height * max(1, len(shown)) + 4 + bar)
    view.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    return view


def _label(text: str, parent: QWidget, name: str, mono: bool = False) -> QLabel:
    label = QLabel(text, parent)
    label.setWordWrap(True)
    label.setObjectName(name)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if mono:
        label.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    return label


def _wrapping(edit: QPlainTextEdit) -> None:
    """Wrap at the pane's width (breaking long identifiers too): a card never scrolls sideways."""
    edit.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
    edit.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    edit.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)


def _sql_view(sql: str, parent: QWidget, max_lines: int = 14) -> SqlEditor:
    editor = SqlEditor(parent, read_only=True)
    _wrapping(editor)
    editor.set_sql(sql)
    _fit_text_height(editor, max_lines)
    return editor


def _rows_view(rows: RowsPayload, parent: QWidget) -> QWidget:
    box = QWidget(parent)
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(_rows_table(rows.columns, rows.rows, box))
    shown = min(len(rows.rows), MAX_CARD_ROWS)
    more = "+" if rows.truncated else ""
    layout.addWidget(
        _label(
            f"{rows.row_count:,}{more} row{'' if rows.row_count == 1 else 's'}"
            + (f", first {shown} shown" if shown < rows.row_count else ""),
            box,
            "rowsNote",
        )
    )
    return box


def join_chain(payload: JoinPathPayload) -> str:
    """``a —(a.x = b.y)→ b —(…)→ c``: the join path as people read it."""
    if not payload.joins:
        return " → ".join(payload.tables)
    parts = [payload.joins[0].from_table]
    for step in payload.joins:
        on = " AND ".join(f"{step.from_table}.{a} = {step.to_table}.{b}" for a, b in step.on)
        parts.append(f" —({on})→ {step.to_table}" if on else f" → {step.to_table}")
    return "".join(parts)


def _payload_view(payload: Any, output: str, parent: QWidget) -> QWidget:
    """The people-readable form of a tool result, chosen by the payload's type."""
    if isinstance(payload, RowsPayload):
        return _rows_view(payload, parent)
    if isinstance(payload, DDLPayload):
        return _sql_view(payload.sql, parent)
    if isinstance(payload, JoinPathPayload) and payload.tables:
        return _label(join_chain(payload), parent, "chain")
    if isinstance(payload, TablesPayload):
        return _label(", ".join(payload.names) or "(no tables)", parent, "tables")
    if isinstance(payload, ForeignKeysPayload):
        return _label("\n".join(payload.lines) or "(no foreign keys)", parent, "foreignKeys", mono=True)
    if isinstance(payload, SubmittedPayload):
        box = QWidget(parent)
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(_sql_view(format_sql(payload.sql), box))
        if payload.result is not None:
            layout.addWidget(_rows_view(payload.result, box))
        return box
    text = QPlainTextEdit(parent)
    text.setReadOnly(True)
    _wrapping(text)
    text.setPlainText(output)
    _fit_text_height(text, 10)
    return text


class ToolCard(QFrame):
    """One tool call: the tool, its arguments, and (when it arrives) its result."""

    TITLE_CHARS = 160

    def __init__(self, tool: str, args: dict[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        _card_frame(self, "toolCard")
        self.tool = tool
        self.args = args
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        self.title = QLabel(self)
        self.title.setWordWrap(True)
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.set_call(tool, args)
        self.status = QLabel("running…", self)
        self.status.setObjectName("toolStatus")
        head = QHBoxLayout()
        head.addWidget(self.title, 1)
        head.addWidget(self.status)
        layout.addLayout(head)
        self.result_view: QWidget | None = None
        self.ok: bool | None = None

    def set_call(self, tool: str, args: dict[str, Any]) -> None:
        """The title: the tool and its arguments, elided past ``TITLE_CHARS`` (the tooltip has all).

        A call the parser could not read has no tool name; it is titled as such, not "()".
        """
        self.tool, self.args = tool, args
        shown_args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
        full = f"{tool}({shown_args})" if tool else "unreadable tool call"
        if len(shown_args) > self.TITLE_CHARS:
            shown_args = shown_args[: self.TITLE_CHARS - 1] + "…"
        if not tool:
            self.title.setText("<b>Unreadable tool call</b>")
        elif args:
            self.title.setText(f"<b>{_breakable(tool)}</b>({_breakable(shown_args)})")
        else:
            self.title.setText(f"<b>{_breakable(tool)}</b>")
        self.title.setToolTip(full)

    def set_result(self, output: str, ok: bool, seconds: float, payload: Any) -> None:
        self.ok = ok
        self.status.setText(f"{'ok' if ok else 'error'} · {seconds * 1000:.0f} ms")
        if ok:
            self.result_view = _payload_view(payload, output, self)
        else:
            # An error is a sentence or two: a wrapped label is exactly as tall as its text.
            self.result_view = _label(output, self, "toolError")
        layout = self.layout()
        assert layout is not None
        layout.addWidget(self.result_view)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_BREAK_AFTER = str.maketrans({c: c + "\u200b" for c in "(,=_./"})


def _breakable(text: str) -> str:
    """Escaped, with zero-width spaces after punctuation: a QLabel wraps only at spaces, and
    ``describe_table(table_name="order_items")`` is one word that would widen a narrow pane."""
    return _escape(text.translate(_BREAK_AFTER))


class AnswerCard(QFrame):
    """The end of an episode: formatted SQL, how it ended, row count, speed.

    Signals:
        open_in_editor(str): the user wants this SQL in the editor (to edit and rerun).
        copy_requested(str): copy this SQL to the clipboard.
        chart_requested(str): run this SQL and show its result as a chart.
    """

    open_in_editor = Signal(str)
    copy_requested = Signal(str)
    chart_requested = Signal(str)

    def __init__(self, sql: str | None, ended_by: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        _card_frame(self, "answerCard")
        self.sql = format_sql(sql) if sql else ""
        self.ended_by = ended_by
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        self.heading = QLabel(answer_heading(ended_by), self)
        self.heading.setWordWrap(True)
        layout.addWidget(self.heading)
        self.editor: SqlEditor | None = None
        if self.sql:
            self.editor = _sql_view(self.sql, self, max_lines=16)
            layout.addWidget(self.editor)
        self.details = QLabel("", self)
        self.details.setObjectName("answerDetails")
        self.details.setWordWrap(True)
        # "Chart" is a link at the end of the details line, not a third button: the wrapped line
        # keeps the card as narrow as the narrowest chat pane allows.
        self.details.setTextFormat(Qt.TextFormat.RichText)
        self.details.linkActivated.connect(lambda _link: self.chart_requested.emit(self.sql))
        self.chartable = False
        self._details = ""
        layout.addWidget(self.details)
        buttons = QHBoxLayout()
        self.open_button = QPushButton("Open in editor", self)
        self.copy_button = QPushButton("Copy SQL", self)
        self.open_button.setEnabled(bool(self.sql))
        self.copy_button.setEnabled(bool(self.sql))
        self.open_button.clicked.connect(lambda: self.open_in_editor.emit(self.sql))
        self.copy_button.clicked.connect(lambda: self.copy_requested.emit(self.sql))
        buttons.addWidget(self.open_button)
        buttons.addWidget(self.copy_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            # Qt colours a rich-text link when it parses the text, with the palette of that moment;
            # the same text again is no change to QLabel, so it is parsed anew only after a clear.
            self.details.clear()
            self.set_details(self._details)

    def set_details(self, text: str) -> None:
        self._details = text
        link = ' · <a href="chart">Chart</a>' if self.chartable else ""
        self.details.setText(_escape(text).replace("\n", "<br>") + link)

    def set_chartable(self, chartable: bool) -> None:
        """Offer "Chart" (the answer has a numeric column to plot)."""
        self.chartable = chartable and bool(self.sql)
        tip = "Chart: run the answer and show its result as a chart" if self.chartable else ""
        self.details.setToolTip(tip)
        self.set_details(self._details)


class RerunCard(QFrame):
    """SQL the user edited and ran, kept in the conversation with its outcome.

    Signals:
        open_in_editor(str): put this SQL back in the editor.
    """

    open_in_editor = Signal(str)

    def __init__(
        self, sql: str, row_count: int | None, error: str | None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        _card_frame(self, "rerunCard")
        self.sql = sql
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        if error:
            outcome = f"failed: {error}"
        elif row_count is None:
            outcome = "ran"
        else:
            outcome = f"{row_count:,} row{'' if row_count == 1 else 's'}"
        head = QHBoxLayout()
        self.heading = QLabel(f"<b>You ran</b> — {_escape(outcome)}", self)
        self.heading.setWordWrap(True)
        reopen = QPushButton("Open in editor", self)
        reopen.clicked.connect(lambda: self.open_in_editor.emit(self.sql))
        head.addWidget(self.heading, 1)
        head.addWidget(reopen)
        layout.addLayout(head)
        layout.addWidget(_sql_view(sql, self, max_lines=8))
