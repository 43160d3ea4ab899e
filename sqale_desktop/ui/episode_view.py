"""One question and the episode that answers it, built live from events or from a stored record.

The view renders what the events (or the stored turn records) say happened: a turn cut by its
own or the episode's token budget, a tool turn without a tool call.  It derives none of it, so a
model whose ``sqale_agent.py`` sets other budgets gets the right notes.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from sqale_desktop.core.agent.events import (
    BudgetUpdated,
    CutBy,
    Episode,
    EpisodeEnded,
    Event,
    TextDelta,
    ToolCalled,
    ToolResulted,
    TurnFinished,
    TurnRecord,
    TurnStarted,
)
from sqale_desktop.core.agent.followup import can_follow_up
from sqale_desktop.core.chart_plan import has_numeric_column
from sqale_desktop.core.server_usage import usage_line
from sqale_desktop.ui.chat_widgets import (
    ENDED_BY_TEXT,
    NO_CALL_NOTE,
    AnswerCard,
    ThinkingBox,
    ToolCard,
    cut_note,
)
from sqale_desktop.ui.status_text import StatusText

LIVE_RATE_MIN_S = 0.25
"""Below this much streaming time a live rate is noise; the last turn's figure is shown instead."""


FOLLOW_UP_TEXT = {
    "continued": "follow-up: continued the thread",
    "carried": "follow-up: earlier questions carried as text (the thread outgrew the context)",
}
"""What the answer card says of a follow-up's form (``core.agent.followup``)."""


def budget_note(tokens: int, cut_by: CutBy) -> str:
    """The note on a turn a token budget ended: its own budget, or what the episode had left."""
    if cut_by == "turn":
        return cut_note(tokens)
    return (
        f"Cut off at {tokens:,} tokens, all that was left of the episode's budget: "
        "the model was still writing."
    )


class TurnView(QWidget):
    """A turn: its streamed text (collapsible) and one card per tool call."""

    def __init__(self, turn: int, final: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.turn = turn
        self.final = final
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 4, 0, 4)
        self._layout.setSpacing(4)
        self._title = f"<b>Turn {turn}</b>{' — final turn' if final else ''}"
        self.header = QLabel(self._title, self)
        self.header.setWordWrap(True)  # "Turn 7 — final turn · 163 tokens, 9.2 tok/s" in a narrow pane
        self._layout.addWidget(self.header)
        self.thinking = ThinkingBox(self)
        self._layout.addWidget(self.thinking)
        self.cards: dict[int, ToolCard] = {}
        self.notes: list[str] = []
        self._note_labels: list[QLabel] = []
        self.summary = ""

    def add_card(self, index: int, card: ToolCard) -> None:
        self.cards[index] = card
        self._layout.addWidget(card)

    def add_note(self, text: str) -> None:
        """Say on the turn what happened that no card shows (no tool call, cut at the budget)."""
        if text in self.notes:
            return
        self.notes.append(text)
        label = QLabel(f"⚠ {text}", self)
        label.setObjectName("turnNote")
        label.setWordWrap(True)
        label.setStyleSheet("#turnNote { color: #b26a00; }")
        self._note_labels.append(label)
        self._layout.insertWidget(2, label)

    def finish(self, summary: str) -> None:
        self.thinking.set_expanded(False)
        self.summary = summary
        self.header.setText(self._title + f" <span style='color:gray'>· {summary}</span>")


class EpisodeView(QFrame):
    """The question, then turns streaming in, then the answer card.

    Signals:
        reask_requested(str): the user wants to edit this question and ask again.
        open_in_editor(str): SQL from the answer card, to edit and rerun.
        copy_requested(str): SQL to put on the clipboard.
        chart_requested(str): the answer's SQL, to run and show as a chart.
        follow_up_requested(): the user wants the next question to continue this answer.
    """

    follow_up_requested = Signal()
    reask_requested = Signal(str)
    open_in_editor = Signal(str)
    copy_requested = Signal(str)
    chart_requested = Signal(str)

    def __init__(
        self,
        question: str,
        parent: QWidget | None = None,
        *,
        recording: bool = False,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("episode")
        self.question = question
        self.recording = recording
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(4, 4, 4, 12)
        self._layout.setSpacing(6)
        head = QHBoxLayout()
        self.question_label = QLabel(question, self)
        self.question_label.setObjectName("question")
        self.question_label.setWordWrap(True)
        font = self.question_label.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.1)
        self.question_label.setFont(font)
        self.reask_button = QPushButton("Edit && re-ask", self)
        self.reask_button.clicked.connect(lambda: self.reask_requested.emit(self.question))
        head.addWidget(self.question_label, 1)
        head.addWidget(self.reask_button)
        self._layout.addLayout(head)
        self.badge: QLabel | None = None
        if recording:
            self.badge = QLabel(
                "▶ Recording: a replayed episode of the SQaLe agent, played through the real loop and "
                "tools on this database. No model is running.",
                self,
            )
            self.badge.setObjectName("recordingBadge")
            self.badge.setWordWrap(True)
            self.badge.setStyleSheet(
                "#recordingBadge { background: #1565c0; color: white; padding: 4px; border-radius: 3px; }"
            )
            self._layout.addWidget(self.badge)
        self.progress = StatusText("", self)  # changes per streamed batch (ui/status_text.py)
        self.progress.setObjectName("episodeProgress")
        self._layout.addWidget(self.progress)
        self.turns: dict[int, TurnView] = {}
        self.answer: AnswerCard | None = None
        self.follow_up_button: QPushButton | None = None
        self.episode: Episode | None = None
        self.ended_by: str | None = None
        self.tool_turns_left: int | None = None
        self.episode_tokens = 0
        self._started = time.monotonic()
        self._elapsed: float | None = None
        self._tokens = 0
        self._decode_seconds = 0.0
        self._last_tps = 0.0
        self._turn_first_token: float | None = None  # when the running turn's first text arrived
        self._turn_tokens = 0  # estimated tokens streamed in the running turn
        self._in_turn = False

    # live ---------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._elapsed is None

    def elapsed(self) -> float:
        return self._elapsed if self._elapsed is not None else time.monotonic() - self._started

    def tokens_per_second(self) -> float:
        """While a turn streams: its tokens since its first token (the prompt's evaluation before
        it does not count as slow decoding); otherwise the finished turns' figure."""
        live = self.live_tokens_per_second()
        if live is not None:
            return live
        return self._tokens / self._decode_seconds if self._decode_seconds > 0 else self._last_tps

    def live_tokens_per_second(self) -> float | None:
        if self._turn_first_token is None or not self.running:
            return None
        seconds = time.monotonic() - self._turn_first_token
        if seconds < LIVE_RATE_MIN_S or self._turn_tokens < 2:
            return None
        # The first token's arrival starts the clock, so it is not counted in the rate.
        return (self._turn_tokens - 1) / seconds

    def tool_cards(self) -> list[ToolCard]:
        return [card for turn in self.turns.values() for card in turn.cards.values()]

    def apply(self, event: Event) -> None:
        """Show one event (text deltas arrive already merged by the caller)."""
        if isinstance(event, TurnStarted):
            self.tool_turns_left = event.tool_turns_left
            self._turn_first_token, self._turn_tokens, self._in_turn = None, 0, True
            self._turn(event.turn, event.final)
        elif isinstance(event, TextDelta):
            if self._turn_first_token is None:
                self._turn_first_token = time.monotonic()
            self._turn_tokens += event.tokens
            self._turn(event.turn).thinking.append(event.text, event.phase)
        elif isinstance(event, ToolCalled):
            view = self._turn(event.turn)
            view.add_card(event.index, ToolCard(event.tool, dict(event.args), view))
        elif isinstance(event, ToolResulted):
            view = self._turn(event.turn)
            card = view.cards.get(event.index)
            if card is None:
                card = ToolCard(event.tool, {}, view)
                view.add_card(event.index, card)
            card.set_result(event.output, event.ok, event.seconds, event.payload)
        elif isinstance(event, BudgetUpdated):
            self.tool_turns_left = event.tool_turns_left
            self.episode_tokens = event.episode_tokens
        elif isinstance(event, TurnFinished):
            self._tokens += event.completion_tokens
            self._decode_seconds += event.seconds
            self._last_tps = event.tokens_per_second
            self._turn_first_token, self._in_turn = None, False
            view = self._turn(event.turn)
            # A replay's speed means nothing: the recording shows token counts only.
            speed = "" if self.recording else f", {event.tokens_per_second:.1f} tok/s"
            kept, drafted = event.accepted_tokens, event.drafted_tokens
            drafts = f", {kept}/{drafted} drafted kept" if drafted else ""
            view.finish(f"{event.completion_tokens} tokens{speed}{drafts}")
            if event.cut_by is not None:
                view.add_note(budget_note(event.max_tokens, event.cut_by))
            if event.no_tool_call:
                view.add_note(NO_CALL_NOTE)  # the loop told the model; the reader is told too
        elif isinstance(event, EpisodeEnded):
            self.finish(event.episode)
        self.refresh_progress()

    def refresh_progress(self) -> None:
        parts = []
        if self.running and self.tool_turns_left is not None:
            parts.append(f"{self.tool_turns_left} tool turns left")
        if self.running and self._in_turn and self._turn_first_token is None:
            parts.append("reading the prompt…")
        elif not self.recording:
            parts.append(f"{self.tokens_per_second():.1f} tok/s")
        parts.append(f"{self.elapsed():.1f} s")
        if not self.running:
            parts.insert(0, ENDED_BY_TEXT.get(self.ended_by or "", self.ended_by or "ended"))
        if self.recording:
            parts.insert(0, "recording")
        self.progress.setText(" · ".join(parts))

    def finish(self, episode: Episode, elapsed: float | None = None) -> None:
        """The episode ended: collapse every turn, add the answer card, freeze the figures."""
        self.episode = episode
        self.ended_by = episode.ended_by
        self._elapsed = elapsed if elapsed is not None else time.monotonic() - self._started
        for view in self.turns.values():
            view.thinking.set_expanded(False)
        answer = AnswerCard(episode.sql, episode.ended_by, self)
        details = []
        if episode.result is not None:
            if episode.result.error:
                details.append(f"error: {episode.result.error}")
            else:
                more = "+" if episode.result.truncated else ""
                count = episode.result.row_count
                details.append(f"{count:,}{more} row{'' if count == 1 else 's'}")
        if episode.error:
            details.append(episode.error)
        if episode.follow_up is not None:
            details.insert(0, FOLLOW_UP_TEXT[episode.follow_up])
        if not self.recording:
            details.append(f"{self.tokens_per_second():.1f} tok/s")
        details.append(f"{self._elapsed:.1f} s")
        billed = usage_line(episode.stats.server_usage)  # a server's reported tokens and their cost
        if billed:
            details.append(billed)
        answer.set_details(" · ".join(details))
        answer.open_in_editor.connect(self.open_in_editor)
        answer.copy_requested.connect(self.copy_requested)
        answer.chart_requested.connect(self.chart_requested)
        result = episode.result
        answer.set_chartable(
            result is not None and not result.error and has_numeric_column(result.columns, result.rows)
        )
        self.answer = answer
        self._layout.addWidget(answer)
        if not self.recording and can_follow_up(episode):
            self.follow_up_button = QPushButton("Follow up", self)
            self.follow_up_button.setToolTip(
                "Ask the next question as a follow-up that continues this answer"
            )
            self.follow_up_button.clicked.connect(self.follow_up_requested)
            self._layout.addWidget(self.follow_up_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.refresh_progress()

    def _turn(self, turn: int, final: bool = False) -> TurnView:
        view = self.turns.get(turn)
        if view is None:
            view = TurnView(turn, final, self)
            self.turns[turn] = view
            for previous in self.turns.values():
                if previous is not view:
                    previous.thinking.set_expanded(False)
            self._layout.addWidget(view)
        return view

    # restored -----------------------------------------------------------------------------
    @classmethod
    def from_record(
        cls,
        episode: Episode,
        elapsed: float | None = None,
        parent: QWidget | None = None,
        recording: bool = False,
    ) -> EpisodeView:
        """Rebuild a finished episode from its stored trace (no payloads: results show as text);
        ``recording``: the demo's recorded episode, badged as such again."""
        view = cls(episode.question, parent, recording=recording)
        last = len(episode.turns)
        for number, turn in enumerate(episode.turns, start=1):
            final = turn.final
            if final is None:  # a trace from before the record said so
                final = number == last and not turn.calls and episode.ended_by in ("final_turn", "no_answer")
            turn_view = view._turn(number, final)
            turn_view.thinking.append(turn.completion, "think")
            for index, call in enumerate(turn.calls):
                card = ToolCard(call.tool, dict(call.args), turn_view)
                turn_view.add_card(index, card)
                card.set_result(call.output, call.ok, call.seconds, None)
            view._tokens += turn.completion_tokens
            view._decode_seconds += turn.seconds
            turn_view.finish(f"{turn.completion_tokens} tokens")
            for note in _record_notes(turn, final):
                turn_view.add_note(note)
        view.finish(episode, elapsed if elapsed is not None else episode.stats.seconds)
        return view


def _record_notes(turn: TurnRecord, final: bool) -> list[str]:
    """The notes a stored turn's record states (what :class:`TurnFinished` said live).

    A trace written before the record kept these facts only has the finish reason and the calls:
    a turn that ended at a length limit is said to be cut at the tokens it wrote, and a tool turn
    with no call says so.
    """
    notes = []
    if turn.cut_by is not None and turn.max_tokens is not None:
        notes.append(budget_note(turn.max_tokens, turn.cut_by))
    elif turn.max_tokens is None and turn.finish_reason == "length":
        notes.append(cut_note(max(turn.completion_tokens, 1)))
    no_call = turn.no_tool_call
    if no_call is None:
        no_call = not turn.calls and not final and turn.finish_reason not in ("cancelled", "error")
    if no_call:
        notes.append(NO_CALL_NOTE)
    return notes
