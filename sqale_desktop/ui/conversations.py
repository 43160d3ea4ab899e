"""What the history keeps of each tab's conversation, and the ways to forget it.

A tab that opens gets its database's stored conversation back (episodes in the chat, hand-run SQL
in the query-history panel, the last SQL in the editor); SQL the user runs by hand is stored with
it; Clear Conversation and Stored Conversations… delete it.  A data file's conversation is kept
under the file itself, not its copy in the import cache.  Episodes themselves are written by
the ``EpisodeController``.  History trouble is reported, never allowed to stop the user's work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from sqale_desktop.core.agent.events import Episode
from sqale_desktop.core.query_history import QueryRun, runs_from_entries
from sqale_desktop.ui.answer_entries import remember_entry
from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.episode_view import EpisodeView
from sqale_desktop.ui.episodes import RECORDED_ENGINE

log = logging.getLogger(__name__)


class Conversations(QObject):
    """Restores, records and clears the conversations of the pages ``pages`` returns.

    ``history`` is the store (``core.history.History``), or None when it could not be opened:
    then nothing is restored or kept.  ``window`` parents the dialogs.

    Signals:
        error(str): a message for the window's banner.
        message(str): a line for the status bar.
        open_requested(object): the Path of a stored conversation's database to open in a tab.
    """

    error = Signal(str)
    message = Signal(str)
    open_requested = Signal(object)

    def __init__(self, history: Any, window: QWidget, pages: Callable[[], list[DatabasePage]]) -> None:
        super().__init__(window)
        self.history = history
        self._window = window
        self._pages = pages

    def restore(self, page: DatabasePage) -> None:
        """Show ``page`` the conversation stored for its database, and where the user left off."""
        if self.history is None:
            return
        try:
            page.conversation_id = self._conversation_id(page)
            entries = self.history.entries(page.conversation_id)
        except Exception as exc:
            self.error.emit(f"Could not read the conversation history: {exc}")
            return
        last_sql = None
        for entry in entries:
            if entry.sql:
                last_sql = entry.sql
            if entry.kind == "rerun":
                continue  # hand-run SQL is listed in the query-history panel, not the chat
            if entry.episode is not None:
                recording = entry.episode.stats.engine == RECORDED_ENGINE
                view = page.chat.add_episode(EpisodeView.from_record(entry.episode, recording=recording))
                remember_entry(view, entry.id)  # a follow-up on it after the restart records its parent
            else:
                stub = Episode(
                    question=entry.question or "",
                    db=str(page.source),
                    sql=entry.sql,
                    ended_by="error",
                    error=entry.error or "interrupted: the app closed while this episode ran",
                )
                page.chat.add_episode(EpisodeView.from_record(stub))
        page.sql.history.set_runs(runs_from_entries(entries, page.source))
        if last_sql:
            page.open_sql(last_sql, run=False)  # where the user left off, ready to edit and run

    def _conversation_id(self, page: DatabasePage) -> int:
        """The conversation of what the user opened: a data file's is its source's (as
        ``ask --db data.csv`` keeps it), so it outlives the cache copy and reopens the source.

        One an older version kept under the cache copy's path, while the source has none yet,
        is still this page's: its questions come back.
        """
        if page.source != page.path:
            key = str(page.source.resolve())
            legacy = str(page.path.resolve())
            by_path = {c.db_path: c for c in self.history.list_conversations()}
            if key not in by_path and legacy in by_path:
                return int(by_path[legacy].id)
        return int(self.history.conversation_for(page.source, title=page.display_name).id)

    def record_rerun(
        self, page: DatabasePage, sql: str, row_count: int | None, error: str | None, duration_ms: int
    ) -> None:
        """The user ran SQL by hand: list it in the query history and store it with the conversation."""
        run = QueryRun(sql, datetime.now(UTC), page.display_name, duration_ms, row_count, error)
        if self.history is not None and page.conversation_id is not None:
            try:
                entry_id = self.history.add_rerun(
                    page.conversation_id, sql, row_count=row_count, error=error, duration_ms=duration_ms
                )
                run = dataclasses.replace(run, entry_id=entry_id)
            except Exception as exc:  # history trouble must not stop the user's work
                log.warning("could not record the query: %s", exc)
        page.sql.history.add_run(run)

    def clear(self, page: DatabasePage | None, confirm: bool = True) -> bool:
        """Delete the stored conversation of ``page``'s database (questions, episodes, query
        history) and start an empty one; True when it was cleared."""
        if page is None or page.chat.current is not None:
            return False
        if confirm:
            from PySide6.QtWidgets import QMessageBox

            answer = QMessageBox.question(
                self._window,
                "Clear the conversation",
                f"Delete the questions, answers and query history kept for {page.display_name}? "
                "The database itself is not touched.",
            )
            if answer != QMessageBox.StandardButton.Yes:
                return False
        if self.history is not None and page.conversation_id is not None:
            try:
                with contextlib.suppress(KeyError):  # already deleted (Stored Conversations…)
                    self.history.delete_conversation(page.conversation_id)
                page.conversation_id = self.history.conversation_for(page.source, title=page.display_name).id
            except Exception as exc:
                self.error.emit(f"Could not clear the conversation: {exc}")
                return False
        page.chat.clear()
        page.sql.history.set_runs([])
        self.message.emit(f"Cleared the conversation about {page.display_name}.")
        return True

    def show_dialog(self) -> None:
        """The stored conversations (also of databases not open), to delete the ones not wanted."""
        if self.history is None:
            return
        from sqale_desktop.ui.conversations_dialog import ConversationsDialog

        dialog = ConversationsDialog(self.history, self._window)
        dialog.deleted.connect(self.conversation_deleted)
        dialog.open_requested.connect(lambda path: self.open_requested.emit(Path(path)))
        dialog.exec()
        dialog.deleteLater()  # one per showing: a closed one is not kept among the top-level widgets

    def conversation_deleted(self, conversation_id: int) -> None:
        """A conversation was deleted from the store: the open tabs that showed it start afresh."""
        for page in self._pages():
            if page.conversation_id == conversation_id:
                self.clear(page, confirm=False)
