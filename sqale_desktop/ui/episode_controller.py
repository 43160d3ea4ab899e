"""Where a running episode's items go: to the chat of the tab that asked, and to the history.

The agent runner hands over what its thread produced (``AgentRunner.deliver_to`` times that);
this object knows which tab each episode belongs to, writes the question and the finished episode
to the conversation history, and tells the window through signals, which only updates its chrome
(status bar, tab marks, the grid the answer opens in).  The finished episode is saved off the UI
thread (``ui.history_writer``; ~36 ms of JSON and SQLite, issue 32), and ``finished`` follows once
the history has it, so whoever reads the history then finds the answer there.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal

from sqale_desktop.core.agent.events import BudgetUpdated, Episode, EpisodeEnded, Event
from sqale_desktop.core.agent.followup import Thread, ThreadError
from sqale_desktop.core.history import fingerprint
from sqale_desktop.core.runtime import Runtime
from sqale_desktop.ui import collector_pause
from sqale_desktop.ui.agent_runner import AgentRunner, EpisodeDone, EpisodeFailed, EventItem, Item
from sqale_desktop.ui.answer_entries import entry_of, remember_entry
from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.episode_view import EpisodeView
from sqale_desktop.ui.history_writer import HistoryWriter

log = logging.getLogger(__name__)


@dataclass
class _Live:
    page: DatabasePage
    view: EpisodeView
    entry_id: int | None
    recording: bool = False


class EpisodeController(QObject):
    """Routes the runner's items to pages and history.

    Signals:
        running_changed(): an episode started or ended (tab marks and Ask buttons follow).
        context_used(int): the running episode's prompt grew to this many tokens.
        finished(object, object, str, bool): (page, Episode or None, error or "", recording) once an
            episode is over and its page and history have it (the history's write comes first).
    """

    running_changed = Signal()
    context_used = Signal(int)
    finished = Signal(object, object, str, bool)

    def __init__(self, runner: AgentRunner, history: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.history = history
        self._live: dict[int, _Live] = {}
        self._writer = HistoryWriter(self)
        self._saving: set[int] = set()  # the entries whose finished episode is being written
        runner.deliver_to(self.apply)
        # No full collection walks what existed before an answer while it streams (a stall of
        # 110+ ms with a large schema open; ui.collector_pause).
        self._collector_token = object()
        self.running_changed.connect(self._pause_collector)
        self.destroyed.connect(functools.partial(collector_pause.release, self._collector_token))

    def _pause_collector(self) -> None:
        if self._live:
            collector_pause.hold(self._collector_token)
        else:
            collector_pause.release(self._collector_token)

    def flush(self) -> bool:
        """Quitting: wait until the history has every finished episode (``finished`` follows each)."""
        return self._writer.flush()

    @property
    def busy(self) -> bool:
        return bool(self._live)

    def running_page(self) -> DatabasePage | None:
        """The tab whose episode is running, if one is."""
        return next((live.page for live in self._live.values()), None)

    def start(self, page: DatabasePage, question: str, runtime: Runtime | None = None) -> int | None:
        """Queue ``question`` for ``page``: the chat shows it, the history keeps it; its id.

        ``runtime``: the engine choice of this one episode (``None``: the model), e.g. the recording.
        A question asked while the page's composer follows up an answer continues that answer's
        thread: the page's own, so a tab never continues another tab's thread.  The thread is the
        one the history stored for that answer, checked against the database as it is now and the
        model that would continue it; a follow-up it refuses (the database changed or is gone, the
        stored thread is damaged, another model wrote it) is not asked (None): the composer says
        why and goes back to a standalone question, the question still in the box.
        """
        recording = runtime is not None and runtime.kind_facts.recording
        follow = page.chat.pending_follow_up() if runtime is None else None
        parent_view, thread = follow if follow is not None else (None, None)
        parent_entry = entry_of(parent_view) if parent_view is not None else None
        model = (runtime or self.runner.runtime).thread_model  # who writes this episode's thread
        if parent_entry is not None and thread is not None:
            try:
                thread = self._stored_thread(parent_entry, page, model, thread)
            except ThreadError as exc:
                page.chat.refuse_follow_up(str(exc))
                return None
        entry_id = None
        # A recording is kept too (it stays in its conversation after a restart); its engine names
        # it (ui.episodes.RECORDED_ENGINE), so that it comes back badged as a recording.
        if self.history is not None and page.conversation_id is not None:
            try:
                entry_id = self.history.add_question(
                    page.conversation_id,
                    question,
                    parent_entry_id=parent_entry,
                    # the file the person opened: a data file's copy is rebuilt when it changes
                    db_fingerprint=fingerprint(page.source),
                    model=model,
                )
            except Exception as exc:  # history trouble must not stop the question
                log.warning("could not record the question: %s", exc)
        view = page.chat.begin(question, recording=recording)
        episode_id = self.runner.ask(question, page.path, runtime, thread)
        self._live[episode_id] = _Live(page, view, entry_id, recording)
        if entry_id is not None:
            remember_entry(view, entry_id)
        self.running_changed.emit()
        return episode_id

    def _stored_thread(self, entry_id: int, page: DatabasePage, model: str, shown: Thread) -> Thread:
        """The thread the history keeps for ``entry_id``, checked for ``page``'s database now and
        for ``model`` (``Runtime.thread_model``) continuing it.

        Raises :class:`ThreadError` for what a person must hear about; trouble reading the history
        itself falls back to the thread the card holds (it is the same text), as history trouble
        never stops a question.
        """
        if entry_id in self._saving:  # its answer ended a moment ago and is being written
            return shown
        try:
            stored: Thread = self.history.thread(entry_id, page.source, model)
        except ThreadError:
            raise
        except Exception as exc:  # an unreadable history file: a bug or the disk, not the thread
            log.warning("could not read the stored thread of entry %s: %s", entry_id, exc)
            return shown
        return stored

    def apply(self, items: list[Item]) -> None:
        """Hand each episode's events to its page in one batch; end episodes that are over."""
        batch: dict[int, list[Event]] = {}
        for item in items:
            if isinstance(item, EventItem):
                batch.setdefault(item.episode_id, []).append(item.event)
                if isinstance(item.event, BudgetUpdated):
                    self.context_used.emit(item.event.episode_tokens)
                continue
            self._flush(batch)
            batch = {}
            if isinstance(item, EpisodeFailed):
                self._over(item.episode_id, None, str(item.error) or type(item.error).__name__)
            elif isinstance(item, EpisodeDone):
                self._over(item.episode_id, None, None)
                self.running_changed.emit()
        self._flush(batch)

    def _flush(self, batch: dict[int, list[Event]]) -> None:
        for episode_id, events in batch.items():
            live = self._live.get(episode_id)
            if live is None:
                continue
            live.page.chat.apply(events)
            for event in events:
                if isinstance(event, EpisodeEnded):
                    self._over(episode_id, event.episode, None)

    def _over(self, episode_id: int, episode: Episode | None, error: str | None) -> None:
        live = self._live.pop(episode_id, None)
        if live is None:
            return
        self.running_changed.emit()
        if live.page.chat.current is live.view:
            live.page.chat.end(episode, error)
        finished = functools.partial(self.finished.emit, live.page, episode, error or "", live.recording)
        if episode is not None and live.entry_id is not None and self.history is not None:
            history, entry_id, saved = self.history, live.entry_id, episode
            self._saving.add(entry_id)

            def then() -> None:
                self._saving.discard(entry_id)
                finished()

            self._writer.submit(lambda: history.finish_episode(entry_id, saved), then)
        elif self._writer.pending():  # after the writes before it, as episodes end in order
            self._writer.submit(lambda: None, finished)
        else:
            finished()
