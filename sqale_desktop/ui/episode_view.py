"""One question and the episode that answers it, built live from events or from a stored record."""

from __future__ import annotations

import time

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from sqale_desktop.core.agent.events import (
    BudgetUpdated,
    Episode,
    EpisodeEnded,
    Event,
    TextDelta,
    ToolCalled,
    ToolResulted,
    TurnFinished,
    TurnStarted,
)
from sqale_desktop.ui.chat_widgets import AnswerCard, ThinkingBox, ToolCard


class TurnView(QWidget):
    """A turn: its streamed text (collapsible) and one card per tool call."""

    def __init__(self, turn: int, final: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.turn = turn
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 4)
        layout.setSpacing(4)
        self.header = QLabel(f"<b>Turn {turn}</b>{' — final turn' if final else ''}", self)
        layout.addWidget(self.header)
        self.thinking = ThinkingBox(self)
        layout.addWidget(self.thinking)
        self.cards: dict[int, ToolCard] = {}

    def add_card(self, index: int, card: ToolCard) -> None:
        self.cards[index] = card
        layout = self.layout()
        assert layout is not None
        layout.addWidget(card)

    def finish(self, summary: str) -> None:
        self.thinking.set_expanded(False)
        self.header.setText(self.header.text() + f" <span style='color:gray'>· {summary}</span>")


class EpisodeView(QFrame):
    """The question, then turns streaming in, then the answer card.

    Signals:
        reask_requested(str): the user wants to edit this question and ask again.
        open_in_editor(str): SQL from the answer card, to edit and rerun.
        copy_requested(str): SQL to put on the clipboard.
    """

    reask_requested = Signal(str)
    open_in_editor = Signal(str)
    copy_requested = Signal(str)

    def __init__(self, question: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("episode")
        self.question = question
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
        self.progress = QLabel("", self)
        self.progress.setObjectName("episodeProgress")
        self._layout.addWidget(self.progress)
        self.turns: dict[int, TurnView] = {}
        self.answer: AnswerCard | None = None
        self.episode: Episode | None = None
        self.ended_by: str | None = None
        self.tool_turns_left: int | None = None
        self.episode_tokens = 0
        self._started = time.monotonic()
        self._elapsed: float | None = None
        self._tokens = 0
        self._decode_seconds = 0.0
        self._last_tps = 0.0

    # live ---------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._elapsed is None

    def elapsed(self) -> float:
        return self._elapsed if self._elapsed is not None else time.monotonic() - self._started

    def tokens_per_second(self) -> float:
        return self._tokens / self._decode_seconds if self._decode_seconds > 0 else self._last_tps

    def tool_cards(self) -> list[ToolCard]:
        return [card for turn in self.turns.values() for card in turn.cards.values()]

    def apply(self, event: Event) -> None:
        """Show one event (text deltas arrive already merged by the caller)."""
        if isinstance(event, TurnStarted):
            self.tool_turns_left = event.tool_turns_left
            self._turn(event.turn, event.final)
        elif isinstance(event, TextDelta):
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
            self._turn(event.turn).finish(
                f"{event.completion_tokens} tokens, {event.tokens_per_second:.1f} tok/s"
            )
        elif isinstance(event, EpisodeEnded):
            self.finish(event.episode)
        self.refresh_progress()

    def refresh_progress(self) -> None:
        parts = []
        if self.running and self.tool_turns_left is not None:
            parts.append(f"{self.tool_turns_left} tool turns left")
        parts.append(f"{self.tokens_per_second():.1f} tok/s")
        parts.append(f"{self.elapsed():.1f} s")
        if not self.running:
            parts.insert(0, "done")
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
        details.append(f"{self.tokens_per_second():.1f} tok/s")
        details.append(f"{self._elapsed:.1f} s")
        answer.set_details(" · ".join(details))
        answer.open_in_editor.connect(self.open_in_editor)
        answer.copy_requested.connect(self.copy_requested)
        self.answer = answer
        self._layout.addWidget(answer)
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
        cls, episode: Episode, elapsed: float | None = None, parent: QWidget | None = None
    ) -> EpisodeView:
        """Rebuild a finished episode from its stored trace (no payloads: results show as text)."""
        view = cls(episode.question, parent)
        for number, turn in enumerate(episode.turns, start=1):
            turn_view = view._turn(number)
            turn_view.thinking.append(turn.completion, "think")
            for index, call in enumerate(turn.calls):
                card = ToolCard(call.tool, dict(call.args), turn_view)
                turn_view.add_card(index, card)
                card.set_result(call.output, call.ok, call.seconds, None)
            view._tokens += turn.completion_tokens
            view._decode_seconds += turn.seconds
            turn_view.finish(f"{turn.completion_tokens} tokens")
        view.finish(episode, elapsed if elapsed is not None else episode.stats.seconds)
        return view
