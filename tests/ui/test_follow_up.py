"""Follow-ups in the window, with real clicks on a replay engine: ask, follow up twice, Stop during
a follow-up, go back to a standalone question, and two tabs that never share a thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.history import History
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.main_window import MainWindow
from tests.ui.replay_scripts import chinook_script
from tests.ui.runtimes import scripted
from tests.ui.windows import open_page

CLICK = Qt.MouseButton.LeftButton


@pytest.fixture
def history(tmp_path: Path) -> History:
    return History(tmp_path / "history.sqlite")


@pytest.fixture
def window(qtbot: Any, history: History) -> Iterator[MainWindow]:
    """A window whose replay engine has room for threads (n_ctx 65,536): follow-ups continue."""
    made = MainWindow(
        Settings(),
        scripted(lambda: ReplayEngine(chinook_script(), chunk_chars=6, delay=0.005, n_ctx=65536)),
        history=history,
    )
    qtbot.addWidget(made)
    made.show()
    yield made
    assert made.shutdown()


def ask_by_keys(qtbot: Any, window: MainWindow, page: Any, question: str) -> Any:
    """Type the question and press Enter; wait for its episode to finish; its Episode."""
    with qtbot.waitSignal(window.episode_finished, timeout=30_000) as finished:
        page.chat.question.setFocus()
        qtbot.keyClicks(page.chat.question, question)
        qtbot.keyClick(page.chat.question, Qt.Key.Key_Return)
    return finished.args[0]


def test_ask_then_follow_up_twice_continues_one_thread(
    qtbot: Any, window: MainWindow, chinook: Path, history: History
) -> None:
    page = open_page(qtbot, window, chinook)
    first = ask_by_keys(qtbot, window, page, "Which artists have the most albums?")
    assert first.follow_up is None and not page.chat.follow_bar.isVisibleTo(page.chat)
    view = page.chat.episodes[0]
    assert view.follow_up_button is not None
    qtbot.mouseClick(view.follow_up_button, CLICK)
    assert page.chat.follow_bar.isVisibleTo(page.chat)
    assert "Which artists have the most albums?" in page.chat.follow_label.text()
    second = ask_by_keys(qtbot, window, page, "Only the top three?")
    assert second.follow_up == "continued" and second.prompt.startswith(first.prompt)
    # the composer now follows the newest answer: the next question goes on with the thread
    assert page.chat.follow_up_of is page.chat.episodes[1]
    third = ask_by_keys(qtbot, window, page, "And their album titles?")
    assert third.follow_up == "continued" and third.prompt.startswith(second.prompt)
    assert third.earlier_questions == ["Which artists have the most albums?", "Only the top three?"]
    card = page.chat.episodes[2].answer
    assert card is not None and "follow-up: continued the thread" in card.details.text()
    entries = [e for e in history.entries(page.conversation_id) if e.kind == "question"]
    assert [e.parent_entry_id for e in entries] == [None, entries[0].id, entries[1].id]

    qtbot.mouseClick(page.chat.standalone_button, CLICK)  # one click back to a standalone question
    assert page.chat.follow_up_of is None and not page.chat.follow_bar.isVisibleTo(page.chat)
    alone = ask_by_keys(qtbot, window, page, "Which artists have the most albums?")
    assert alone.follow_up is None and alone.prompt == first.prompt


def test_stop_during_a_follow_up_leaves_the_thread_usable(
    qtbot: Any, window: MainWindow, chinook: Path
) -> None:
    page = open_page(qtbot, window, chinook)
    first = ask_by_keys(qtbot, window, page, "Which artists have the most albums?")
    assert page.chat.episodes[0].follow_up_button is not None
    qtbot.mouseClick(page.chat.episodes[0].follow_up_button, CLICK)
    with qtbot.waitSignal(window.episode_finished, timeout=30_000) as stopped:
        qtbot.keyClicks(page.chat.question, "Only the top three?")
        qtbot.keyClick(page.chat.question, Qt.Key.Key_Return)
        view = page.chat.current
        assert view is not None
        qtbot.waitUntil(lambda: bool(view.turns), timeout=30_000)
        qtbot.mouseClick(page.chat.stop_button, CLICK)
    assert stopped.args[0].ended_by == "cancelled"
    assert page.chat.episodes[1].follow_up_button is None  # a stopped answer offers no follow-up
    assert page.chat.follow_up_of is page.chat.episodes[0]  # the composer still follows the answer
    again = ask_by_keys(qtbot, window, page, "Only the top three?")
    assert again.follow_up == "continued" and again.prompt.startswith(first.prompt)
    assert again.earlier_questions == ["Which artists have the most albums?"]


def test_a_follow_up_in_one_tab_never_continues_another_tabs_thread(
    qtbot: Any, window: MainWindow, chinook: Path, northwind: Path
) -> None:
    chinook_page = open_page(qtbot, window, chinook)
    ask_by_keys(qtbot, window, chinook_page, "Which artists have the most albums?")
    assert chinook_page.chat.episodes[0].follow_up_button is not None
    qtbot.mouseClick(chinook_page.chat.episodes[0].follow_up_button, CLICK)
    other = open_page(qtbot, window, northwind)
    assert other.chat.follow_up_of is None and not other.chat.follow_bar.isVisibleTo(other.chat)
    episode = ask_by_keys(qtbot, window, other, "How many orders?")
    assert episode.follow_up is None and episode.earlier_questions == []
    assert chinook_page.chat.follow_up_of is chinook_page.chat.episodes[0]  # still waiting in its tab


def test_a_thread_that_outgrows_the_context_is_carried_and_the_card_says_so(
    qtbot: Any, history: History, chinook: Path
) -> None:
    small = MainWindow(
        Settings(),
        scripted(lambda: ReplayEngine(chinook_script(), chunk_chars=6, n_ctx=8192)),
        history=history,
    )
    qtbot.addWidget(small)
    small.show()
    try:
        page = open_page(qtbot, small, chinook)
        first = ask_by_keys(qtbot, small, page, "Which artists have the most albums?")
        assert page.chat.episodes[0].follow_up_button is not None
        qtbot.mouseClick(page.chat.episodes[0].follow_up_button, CLICK)
        second = ask_by_keys(qtbot, small, page, "Only the top three?")
        assert second.follow_up == "carried" and not second.prompt.startswith(first.prompt)
        assert "Which artists have the most albums?" in second.prompt  # carried as text
        card = page.chat.episodes[1].answer
        assert card is not None and "earlier questions carried as text" in card.details.text()
    finally:
        assert small.shutdown()


def test_a_quick_follow_up_while_the_answer_is_still_being_written_continues_it(
    qtbot: Any, window: MainWindow, chinook: Path, history: History, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer is written to the history after its card shows (on the writer's thread): Enter
    pressed before that write lands continues the card's thread, it is not refused."""
    page = open_page(qtbot, window, chinook)
    ask_by_keys(qtbot, window, page, "Which artists have the most albums?")
    assert page.chat.episodes[0].follow_up_button is not None
    qtbot.mouseClick(page.chat.episodes[0].follow_up_button, CLICK)
    release = threading.Event()
    write = History.finish_episode

    def held(self: History, entry_id: int, episode: Any) -> None:
        assert release.wait(60), "the held history write was never released"
        write(self, entry_id, episode)

    monkeypatch.setattr(History, "finish_episode", held)
    finished: list[Any] = []
    window.episode_finished.connect(finished.append)
    try:
        qtbot.keyClicks(page.chat.question, "Only the top three?")
        qtbot.keyClick(page.chat.question, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: page.chat.current is None and len(page.chat.episodes) == 2, timeout=30_000)
        assert page.chat.follow_up_of is page.chat.episodes[1] and finished == []  # its write is held
        qtbot.keyClicks(page.chat.question, "And their album titles?")
        qtbot.keyClick(page.chat.question, Qt.Key.Key_Return)
        assert page.chat.current is not None and not page.chat.follow_note.isVisibleTo(page.chat)
    finally:
        release.set()
    qtbot.waitUntil(lambda: len(finished) == 2, timeout=30_000)
    second, third = finished
    assert third.follow_up == "continued" and third.prompt.startswith(second.prompt)
    assert third.earlier_questions == ["Which artists have the most albums?", "Only the top three?"]
    entries = [e for e in history.entries(page.conversation_id) if e.kind == "question"]
    assert [e.parent_entry_id for e in entries] == [None, entries[0].id, entries[1].id]
