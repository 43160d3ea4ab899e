"""The conversation with one database: episodes stacked in a scroll area, the question box below.

Follow-ups (issue 29): each finished answer offers *Follow up*; the composer then says that the
next question continues that answer, with a one-click way back to a standalone question.  A
follow-up that finishes becomes what the composer follows (the thread goes on); one that is
stopped or fails leaves the composer on the answer it followed, so the thread stays usable.  The
state is the pane's own: one tab's composer never continues another tab's thread.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop.core.agent.events import Episode, Event
from sqale_desktop.core.agent.followup import Thread, ThreadError
from sqale_desktop.ui.chat_widgets import RerunCard
from sqale_desktop.ui.episode_view import EpisodeView
from sqale_desktop.ui.status_text import StatusText

PLACEHOLDER = "Ask a question…  (Enter asks, Shift+Enter for a new line)"


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class QuestionBox(QPlainTextEdit):
    """Where the question is typed; Enter asks, Shift+Enter starts a new line.

    Signals:
        submitted(): Enter was pressed.
    """

    submitted = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Qt's name
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submitted.emit()
            event.accept()
            return
        super().keyPressEvent(event)


class ChatPane(QWidget):
    """Episodes of one conversation and the question box.

    Signals:
        ask_requested(str): the user asked this question.
        stop_requested(): the user pressed Stop.
        open_in_editor(str): answer SQL to put in the SQL editor.
        copy_requested(str): SQL to copy.
        chart_requested(str): answer SQL to run and show as a chart.
        watch_requested(): the user wants to watch the recorded demo episode.
        follow_up_changed(object): the ``Thread`` the next question continues, or None when it is
            a standalone question again (the agent thread prefetches the follow-up's start).
    """

    watch_requested = Signal()
    ask_requested = Signal(str)
    stop_requested = Signal()
    follow_up_changed = Signal(object)
    open_in_editor = Signal(str)
    copy_requested = Signal(str)
    chart_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.scroll_area = QScrollArea(self)
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._content = QWidget(self.scroll_area)
        self._column = QVBoxLayout(self._content)
        self._column.setContentsMargins(6, 6, 6, 6)
        self.placeholder = QLabel(
            "Ask a question about this database in plain words.\n"
            "The agent explores the tables with tools, tests its query, and answers with SQL.",
            self._content,
        )
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setObjectName("chatPlaceholder")
        self._column.addWidget(self.placeholder)
        self.watch_button = QPushButton("▶ Watch a recorded answer (no model needed)", self._content)
        self.watch_button.setObjectName("watchRecording")
        self.watch_button.setToolTip(
            "Replay a recorded episode of the SQaLe agent on this demo database: its thinking, its "
            "tool calls run for real on the database, and the answer's grid"
        )
        self.watch_button.clicked.connect(self.watch_requested)
        self.watch_button.hide()
        self._column.addWidget(self.watch_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self.suggestions = QWidget(self._content)
        self._suggestion_column = QVBoxLayout(self.suggestions)
        self._suggestion_column.setContentsMargins(40, 6, 40, 6)
        self.suggestions.hide()
        self._column.addWidget(self.suggestions)
        self._column.addStretch(1)
        self.scroll_area.setWidget(self._content)
        layout.addWidget(self.scroll_area, 1)

        self.question = QuestionBox(self)
        self.question.setPlaceholderText(PLACEHOLDER)
        self.question.setFixedHeight(self.question.fontMetrics().lineSpacing() * 3 + 14)
        self.question.submitted.connect(self._submit)
        self.ask_button = QPushButton("Ask", self)
        self.ask_button.setDefault(True)
        self.ask_button.clicked.connect(self._submit)
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setToolTip("Stop generation and the running query (Esc)")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop_requested)
        # Wraps (a long reason must not widen the pane), and changes per streamed batch without
        # relaying out the window (ui/status_text.py).
        self.live = StatusText("", self)
        self.live.setObjectName("liveStatus")
        self.follow_bar = QWidget(self)
        self.follow_bar.setObjectName("followUpBar")
        follow_row = QHBoxLayout(self.follow_bar)
        follow_row.setContentsMargins(0, 0, 0, 0)
        self.follow_label = QLabel("", self.follow_bar)
        self.follow_label.setObjectName("followUpLabel")
        self.follow_label.setWordWrap(True)
        self.standalone_button = QPushButton("New question", self.follow_bar)
        self.standalone_button.setToolTip("Ask the next question on its own, not as a follow-up")
        self.standalone_button.clicked.connect(self.standalone)
        follow_row.addWidget(self.follow_label, 1)
        follow_row.addWidget(self.standalone_button)
        self.follow_bar.hide()
        # Why the follow-up just asked was not asked (its thread was refused); gone at the next question.
        self.follow_note = QLabel("", self)
        self.follow_note.setObjectName("followUpRefused")
        self.follow_note.setWordWrap(True)
        self.follow_note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.follow_note.hide()
        row = QHBoxLayout()
        row.addWidget(self.question, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.ask_button)
        buttons.addWidget(self.stop_button)
        row.addLayout(buttons)
        layout.addWidget(self.live)
        layout.addWidget(self.follow_bar)
        layout.addWidget(self.follow_note)
        layout.addLayout(row)

        self.episodes: list[EpisodeView] = []
        self.reruns: list[RerunCard] = []
        self.current: EpisodeView | None = None
        self.follow_up_of: EpisodeView | None = None
        """The answer the next question continues (None: the next question is standalone)."""
        self._asked_on: EpisodeView | None = None  # the answer the running episode follows up
        self._clock = QTimer(self)  # refreshes elapsed time while an episode runs
        self._clock.setInterval(250)
        self._clock.timeout.connect(self.refresh_progress)
        self._ask_enabled = True
        self._follow = True  # keep the newest output in view while the user has not scrolled up
        bar = self.scroll_area.verticalScrollBar()
        bar.rangeChanged.connect(self._range_changed)
        bar.valueChanged.connect(self._value_changed)

    # user actions ---------------------------------------------------------------------------
    def _submit(self) -> None:
        text = self.question.toPlainText().strip()
        if not text or self.current is not None or not self._ask_enabled:
            return
        self.ask_requested.emit(text)

    def follow_up(self, view: EpisodeView) -> bool:
        """Make the next question continue ``view``'s answer; False (and the reason shown) when
        that answer cannot be continued."""
        if view.episode is None:
            return False
        try:
            thread = Thread.of(view.episode)
        except ThreadError as exc:
            self.live.setText(str(exc))
            return False
        self.follow_up_of = view
        self.follow_note.hide()
        self.follow_label.setText(f"↳ Follow-up to “{_short(view.question)}”: the next question continues it")
        self.follow_bar.show()
        self.question.setPlaceholderText("Ask a follow-up…  (Enter asks, Shift+Enter for a new line)")
        self.question.setFocus()
        self.follow_up_changed.emit(thread)  # the model can start on the follow-up while it is typed
        return True

    def standalone(self) -> None:
        """The next question is asked on its own again."""
        self.follow_up_of = None
        self.follow_bar.hide()
        self.question.setPlaceholderText(PLACEHOLDER)
        self.follow_up_changed.emit(None)

    def refuse_follow_up(self, reason: str) -> None:
        """The follow-up just asked was not asked (``reason``: why its thread cannot go on): the
        composer says so and goes back to a standalone question, the question still in the box."""
        self.standalone()
        self.follow_note.setText(f"The follow-up was not asked: {reason}. Press Enter to ask it on its own.")
        self.follow_note.show()
        self.question.setFocus()

    def pending_follow_up(self) -> tuple[EpisodeView, Thread] | None:
        """The answer the next question continues and its thread, or None for a standalone one."""
        view = self.follow_up_of
        if view is None or view.episode is None:
            return None
        try:
            return view, Thread.of(view.episode)
        except ThreadError:
            return None

    def set_recording_available(self, available: bool) -> None:
        """Offer the recorded demo episode (on the demo database only)."""
        self.watch_button.setVisible(available)

    def set_ask_enabled(self, enabled: bool, reason: str = "") -> None:
        """Asking needs a model and an idle agent; otherwise the pane says why and the rest works."""
        self._ask_enabled = enabled
        self.ask_button.setEnabled(enabled and self.current is None)
        self.ask_button.setToolTip("" if enabled else reason)
        if not enabled and reason and self.current is None:
            self.live.setText(reason)
        elif enabled and self.current is None:
            self.live.setText("")

    def edit_question(self, text: str) -> None:
        """Re-ask: put a question back in the box to edit and run again."""
        self.question.setPlainText(text)
        self.question.setFocus()
        cursor = self.question.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.question.setTextCursor(cursor)

    def set_suggestions(self, questions: list[str]) -> None:
        """Example questions under the placeholder (the demo database has some with real answers);
        clicking one puts it in the question box to edit or ask."""
        for button in self.suggestions.findChildren(QPushButton):
            button.deleteLater()
        for text in questions:
            button = QPushButton(text, self.suggestions)
            button.setFlat(True)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.setToolTip("Put this question in the box")
            button.setStyleSheet("QPushButton { color: palette(link); }")
            button.clicked.connect(lambda _checked=False, q=text: self.edit_question(q))
            self._suggestion_column.addWidget(button)
        self.suggestions.setVisible(bool(questions) and not self.placeholder.isHidden())

    # episodes ---------------------------------------------------------------------------------
    def add_episode(self, view: EpisodeView) -> EpisodeView:
        self.placeholder.hide()
        self.suggestions.hide()
        view.reask_requested.connect(self.edit_question)
        view.follow_up_requested.connect(lambda v=view: self.follow_up(v))
        view.open_in_editor.connect(self.open_in_editor)
        view.copy_requested.connect(self.copy_requested)
        view.chart_requested.connect(self.chart_requested)
        self._column.insertWidget(self._column.count() - 1, view)
        self.episodes.append(view)
        self._scroll_to_end()
        return view

    def add_rerun(self, sql: str, row_count: int | None, error: str | None) -> RerunCard:
        """Keep SQL the user ran in the conversation."""
        self.suggestions.hide()
        self.placeholder.hide()
        card = RerunCard(sql, row_count, error, self._content)
        card.open_in_editor.connect(self.open_in_editor)
        self._column.insertWidget(self._column.count() - 1, card)
        self.reruns.append(card)
        self._scroll_to_end()
        return card

    def clear(self) -> None:
        """Empty the conversation shown (the window has deleted the stored one)."""
        for widget in [*self.episodes, *self.reruns]:
            self._column.removeWidget(widget)
            widget.deleteLater()
        self.episodes.clear()
        self.reruns.clear()
        self.standalone()
        self.placeholder.show()

    def begin(self, question: str, recording: bool = False) -> EpisodeView:
        """A new live episode: the pane is busy until ``end``."""
        view = self.add_episode(EpisodeView(question, self._content, recording=recording))
        self._asked_on = None if recording else self.follow_up_of
        self.follow_note.hide()
        self.current = view
        self.question.clear()
        self.ask_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self._clock.start()
        self.refresh_progress()
        return view

    def apply(self, events: list[Event]) -> None:
        if self.current is None:
            return
        for event in events:
            self.current.apply(event)
        self.live.setText(self.current.progress.text())

    def end(self, episode: Episode | None = None, error: str | None = None) -> None:
        """The live episode is over (finished, stopped or failed); the pane is ready again."""
        view = self.current
        self.current = None
        self._clock.stop()
        if view is not None and view.answer is None:
            view.finish(episode or Episode(question=view.question, db="", ended_by="error", error=error))
        asked_on, self._asked_on = self._asked_on, None
        if view is not None and asked_on is not None and view.follow_up_button is not None:
            self.follow_up(view)  # the thread goes on from the newest answer
        self.stop_button.setEnabled(False)
        self.ask_button.setEnabled(self._ask_enabled)
        self.live.setText(f"Error: {error}" if error else "")
        self._scroll_to_end()

    def refresh_progress(self) -> None:
        """Show the running answer's progress line (elapsed time, tokens per second) now, in the
        answer and in the pane's live line; the clock does it every 250 ms while one runs."""
        view = self.current
        if view is None:
            return
        view.refresh_progress()
        self.live.setText(view.progress.text())

    def _range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self.scroll_area.verticalScrollBar().setValue(maximum)

    def _value_changed(self, value: int) -> None:
        self._follow = value >= self.scroll_area.verticalScrollBar().maximum() - 40

    def _scroll_to_end(self) -> None:
        self._follow = True
        bar = self.scroll_area.verticalScrollBar()
        bar.setValue(bar.maximum())
