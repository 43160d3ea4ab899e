"""An answer that ended just before quitting is in the history after a relaunch (issue 32: the
finished episode is saved off the UI thread, and quitting waits for that write).

The write is held until the quit begins (``History.finish_episode`` waits for a gate that the
window's shutdown opens first thing), so the quit always finds it pending; the history is read
as soon as the app is down, before the relaunch: the quit must have completed the write.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from sqale_desktop.core.agent.events import Episode
from sqale_desktop.core.history import History
from sqale_desktop.ui.main_window import MainWindow
from tests.e2e.test_followup_journeys import FIRST, front_page, type_question, use_replay

GATE_S = 120.0  # a deadline only: the quit opens the gate at once


def test_an_answer_finished_just_before_quit_is_there_after_a_relaunch(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, chinook: Path
) -> None:
    use_replay(monkeypatch, n_ctx=65_536)
    gate = threading.Event()
    finish_episode = History.finish_episode
    shutdown = MainWindow.shutdown

    def held_finish(self: History, entry_id: int, episode: Episode) -> None:
        gate.wait(GATE_S)  # on the writer thread: the UI goes on meanwhile
        finish_episode(self, entry_id, episode)

    def shutdown_opens_the_gate(self: MainWindow) -> bool:
        gate.set()
        return shutdown(self)

    monkeypatch.setattr(History, "finish_episode", held_finish)
    monkeypatch.setattr(MainWindow, "shutdown", shutdown_opens_the_gate)
    seen: dict[str, Any] = {}

    def ask_and_quit_at_once(window: Any) -> None:
        page = front_page(qtbot, window, "chinook.sqlite")
        finished: list[object] = []
        window.episode_finished.connect(finished.append)
        type_question(qtbot, page, FIRST)
        qtbot.keyClick(page.chat.question, Qt.Key.Key_Return)
        qtbot.waitUntil(
            lambda: bool(page.chat.episodes) and page.chat.episodes[0].answer is not None, timeout=60_000
        )
        view = page.chat.episodes[0]
        seen["shown"] = (view.episode.question, view.episode.sql)
        seen["saved_before_quit"] = bool(finished) or gate.is_set()
        # the launcher presses Ctrl+Q now

    assert launch(ask_and_quit_at_once, files=[chinook]) == 0
    assert seen["saved_before_quit"] is False  # the quit found the write pending
    question, sql = seen["shown"]
    assert question == FIRST and sql
    store = History()
    entries = [e for e in store.entries(store.conversation_for(chinook).id) if e.kind == "question"]
    assert [(e.question, e.ended_by, e.sql) for e in entries] == [(FIRST, "submit_sql", sql)]

    def look(window: Any) -> None:
        page = front_page(qtbot, window, "chinook.sqlite", episodes=1)
        view = page.chat.episodes[0]
        seen["restored"] = (view.episode.question, view.episode.sql)
        seen["card"] = page.chat.episodes[0].answer is not None

    assert launch(look) == 0
    assert seen["restored"] == (FIRST, sql) and seen["card"]
