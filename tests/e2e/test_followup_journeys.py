"""Follow-up questions through the whole app (issue 29): ``run_app`` started as ``sqale-desktop``
starts it, real keys and clicks, a quit and a relaunch on the same settings folder, and what a
person sees: the composer's "↳ Follow-up to …", the answer card's continued / carried line, the
composer's note on a follow-up that was not asked, and the history's chain of parents.

The content comes from the replay engine (the scripted chinook answer, run through the real loop
and tools): ``resolve``, the app's one engine decision, answers with it as ``--replay`` does.
One journey runs SmolLM2 on the real llama.cpp path (slow).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from sqale_desktop.core import paths
from sqale_desktop.core.agent.events import Episode
from sqale_desktop.core.history import History
from tests.helpers import smollm2_gguf
from tests.ui.replay_scripts import chinook_script

CLICK = Qt.MouseButton.LeftButton
CTRL = Qt.KeyboardModifier.ControlModifier
FIRST, SECOND, THIRD, FOURTH = (
    "Which artists have the most albums?",
    "Only the top three?",
    "And their album titles?",
    "Which of them has the longest name?",
)
CONTINUED = "follow-up: continued the thread"
CARRIED = "follow-up: earlier questions carried as text (the thread outgrew the context)"


def use_replay(
    monkeypatch: pytest.MonkeyPatch, n_ctx: int, delay: float = 0.0, model_file: str | None = None
) -> None:
    """The app's engine is the replay of the chinook answer, with room for ``n_ctx`` tokens (a
    thread plus one question's budget beyond it is carried); ``delay`` between streamed chunks
    gives Stop something to stop; ``model_file`` names the model it stands for (another model
    than the plain replay's, for the history).  Everything else is what ``resolve`` makes of the
    settings."""
    from sqale_desktop.core.engines.replay import ReplayEngine
    from sqale_desktop.core.runtime import ModelChoice, Runtime, resolve
    from sqale_desktop.ui import app

    def factory() -> ReplayEngine:
        return ReplayEngine(chinook_script(), chunk_chars=6, delay=delay, n_ctx=n_ctx)

    def replay(settings: Any, choice: ModelChoice | None = None) -> Runtime:
        if choice is not None:
            return resolve(settings, choice)
        scripted = resolve(settings, ModelChoice("replay"))  # the settings' protocol and loop
        model_path = Path(model_file) if model_file else None
        return dataclasses.replace(
            scripted, factory=factory, description="replay of the chinook answer", model_path=model_path
        )

    monkeypatch.setattr(app, "resolve", replay)


def front_page(qtbot: Any, window: Any, name: str, episodes: int = 0) -> Any:
    """The tab in front once it shows ``name`` with ``episodes`` restored answers."""
    qtbot.waitUntil(
        lambda: (
            not window.databases._opening
            and window.current_page() is not None
            and window.current_page().path.name == name
            and len(window.current_page().chat.episodes) == episodes
        ),
        timeout=30_000,
    )
    return window.current_page()


def ask_by_keys(qtbot: Any, window: Any, page: Any, question: str) -> Episode:
    """Type ``question`` in the tab's box and press Enter; its Episode once it has ended."""
    with qtbot.waitSignal(window.episode_finished, timeout=60_000) as finished:
        type_question(qtbot, page, question)
        qtbot.keyClick(page.chat.question, Qt.Key.Key_Return)
    episode = finished.args[0]
    assert isinstance(episode, Episode)
    return episode


def type_question(qtbot: Any, page: Any, question: str) -> None:
    page.chat.question.setFocus()
    qtbot.keyClicks(page.chat.question, question)


def card_line(page: Any, index: int) -> str:
    """The details line of the ``index``-th answer card of ``page`` (form, rows, time…)."""
    card = page.chat.episodes[index].answer
    assert card is not None
    return str(card.details.text())


def click_follow_up(qtbot: Any, page: Any, index: int) -> str:
    """Click Follow up on the ``index``-th answer; what the composer then says."""
    button = page.chat.episodes[index].follow_up_button
    assert button is not None, f"answer {index} offers no Follow up"
    qtbot.mouseClick(button, CLICK)
    assert page.chat.follow_bar.isVisibleTo(page.chat)
    return str(page.chat.follow_label.text())


def enter_is_refused(qtbot: Any, page: Any) -> dict[str, Any]:
    """Press Enter on the question typed in ``page``'s box; what a person then sees."""
    answers = len(page.chat.episodes)
    qtbot.keyClick(page.chat.question, Qt.Key.Key_Return)
    return {
        "note": page.chat.follow_note.text() if page.chat.follow_note.isVisibleTo(page.chat) else "",
        "asked": len(page.chat.episodes) > answers or page.chat.current is not None,
        "box": page.chat.question.toPlainText(),
        "follows": page.chat.follow_bar.isVisibleTo(page.chat),
    }


def parents(db: Path) -> list[tuple[str | None, str | None]]:
    """(question, its parent's question) of every question the history keeps for ``db``, in order."""
    store = History()
    entries = [e for e in store.entries(store.conversation_for(db).id) if e.kind == "question"]
    by_id = {e.id: e.question for e in entries}
    return [(e.question, None if e.parent_entry_id is None else by_id[e.parent_entry_id]) for e in entries]


def test_a_thread_asked_and_followed_up_twice_goes_on_after_a_relaunch(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, chinook: Path, artifacts: Path
) -> None:
    """(a) Ask, follow up twice, quit, relaunch, follow up on the restored answer: it continues
    the stored thread, the cards say so, and the history holds the chain of parents."""
    use_replay(monkeypatch, n_ctx=65_536)
    seen: dict[str, Any] = {}

    def ask_and_follow_up_twice(window: Any) -> None:
        page = front_page(qtbot, window, "chinook.sqlite")
        first = ask_by_keys(qtbot, window, page, FIRST)
        seen["composer"] = click_follow_up(qtbot, page, 0)
        second = ask_by_keys(qtbot, window, page, SECOND)
        third = ask_by_keys(qtbot, window, page, THIRD)  # the composer follows the newest answer
        seen["episodes"] = (first, second, third)
        seen["cards"] = [card_line(page, i) for i in range(3)]

    assert launch(ask_and_follow_up_twice, files=[chinook]) == 0
    first, second, third = seen["episodes"]
    assert seen["composer"].startswith(f"↳ Follow-up to “{FIRST}”")
    assert (first.follow_up, second.follow_up, third.follow_up) == (None, "continued", "continued")
    assert third.prompt.startswith(second.prompt) and second.prompt.startswith(first.prompt)
    assert [CONTINUED in line for line in seen["cards"]] == [False, True, True]

    def follow_up_after_relaunch(window: Any) -> None:
        page = front_page(qtbot, window, "chinook.sqlite", episodes=3)
        seen["restored"] = [card_line(page, i) for i in range(3)]
        seen["composer_at_start"] = page.chat.follow_bar.isVisibleTo(page.chat)
        seen["composer_after"] = click_follow_up(qtbot, page, 2)
        seen["fourth"] = ask_by_keys(qtbot, window, page, FOURTH)
        seen["fourth_card"] = card_line(page, 3)
        window.grab().save(str(artifacts / "journey_follow_up_relaunched.png"))

    assert launch(follow_up_after_relaunch) == 0
    fourth = seen["fourth"]
    assert [CONTINUED in line for line in seen["restored"]] == [False, True, True]
    assert seen["composer_at_start"] is False  # a relaunch starts with a standalone question
    assert seen["composer_after"].startswith(f"↳ Follow-up to “{THIRD}”")
    assert fourth.follow_up == "continued" and fourth.prompt.startswith(third.prompt)
    assert fourth.earlier_questions == [FIRST, SECOND, THIRD]
    assert fourth.prompt.count("<|im_start|>system") == 1
    assert CONTINUED in seen["fourth_card"]
    assert parents(chinook) == [(FIRST, None), (SECOND, FIRST), (THIRD, SECOND), (FOURTH, THIRD)]


def test_stop_during_a_follow_up_leaves_the_thread_usable(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, chinook: Path
) -> None:
    """(b) Stop (the button) while a follow-up runs: the stopped answer offers no follow-up, the
    composer still follows the answer before it, and the next follow-up continues that thread,
    also after a relaunch."""
    use_replay(monkeypatch, n_ctx=65_536, delay=0.01)
    seen: dict[str, Any] = {}

    def stop_a_follow_up(window: Any) -> None:
        page = front_page(qtbot, window, "chinook.sqlite")
        seen["first"] = ask_by_keys(qtbot, window, page, FIRST)
        click_follow_up(qtbot, page, 0)
        with qtbot.waitSignal(window.episode_finished, timeout=60_000) as stopped:
            type_question(qtbot, page, SECOND)
            qtbot.keyClick(page.chat.question, Qt.Key.Key_Return)
            running = page.chat.current
            assert running is not None
            qtbot.waitUntil(lambda: bool(running.turns), timeout=30_000)
            qtbot.mouseClick(page.chat.stop_button, CLICK)
        seen["stopped"] = stopped.args[0]
        seen["stopped_offers"] = page.chat.episodes[1].follow_up_button is not None
        seen["still_follows"] = page.chat.follow_up_of is page.chat.episodes[0]
        seen["again"] = ask_by_keys(qtbot, window, page, SECOND)

    assert launch(stop_a_follow_up, files=[chinook]) == 0
    first, again = seen["first"], seen["again"]
    assert seen["stopped"].ended_by == "cancelled"
    assert seen["stopped_offers"] is False and seen["still_follows"] is True
    assert again.follow_up == "continued" and again.prompt.startswith(first.prompt)
    assert again.earlier_questions == [FIRST]

    def after_relaunch(window: Any) -> None:
        page = front_page(qtbot, window, "chinook.sqlite", episodes=3)
        seen["offers"] = [view.follow_up_button is not None for view in page.chat.episodes]
        click_follow_up(qtbot, page, 2)
        seen["third"] = ask_by_keys(qtbot, window, page, THIRD)

    assert launch(after_relaunch) == 0
    assert seen["offers"] == [True, False, True]
    assert seen["third"].follow_up == "continued" and seen["third"].prompt.startswith(again.prompt)
    assert parents(chinook) == [(FIRST, None), (SECOND, FIRST), (SECOND, FIRST), (THIRD, SECOND)]


def test_a_follow_up_in_one_tab_never_continues_another_tabs_thread(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, chinook: Path, northwind: Path
) -> None:
    """(c) Follow Up in chinook's tab, switch tabs with Ctrl+PgDown: northwind's question is
    standalone; back with Ctrl+PgUp, chinook's composer still follows its own answer."""
    use_replay(monkeypatch, n_ctx=65_536)
    seen: dict[str, Any] = {}

    def two_tabs(window: Any) -> None:
        qtbot.waitUntil(lambda: len(window.pages()) == 2 and not window.databases._opening, timeout=30_000)
        if window.current_page().path.name != "chinook.sqlite":
            qtbot.keyClick(window, Qt.Key.Key_PageUp, CTRL)  # two tabs: the other one is chinook's
        chinook_page = front_page(qtbot, window, "chinook.sqlite")
        seen["first"] = ask_by_keys(qtbot, window, chinook_page, FIRST)
        click_follow_up(qtbot, chinook_page, 0)
        qtbot.keyClick(window, Qt.Key.Key_PageDown, CTRL)
        other = front_page(qtbot, window, "northwind.sqlite")
        seen["other_follows"] = other.chat.follow_bar.isVisibleTo(other.chat)
        seen["other"] = ask_by_keys(qtbot, window, other, "How many orders are there?")
        qtbot.keyClick(window, Qt.Key.Key_PageUp, CTRL)
        back = front_page(qtbot, window, "chinook.sqlite", episodes=1)
        seen["back_follows"] = back.chat.follow_bar.isVisibleTo(back.chat)
        seen["second"] = ask_by_keys(qtbot, window, back, SECOND)

    assert launch(two_tabs, files=[chinook, northwind]) == 0
    other, second = seen["other"], seen["second"]
    assert seen["other_follows"] is False and seen["back_follows"] is True
    assert other.follow_up is None and other.earlier_questions == []
    assert FIRST not in other.prompt  # nothing of chinook's thread
    assert second.follow_up == "continued" and second.prompt.startswith(seen["first"].prompt)
    assert second.earlier_questions == [FIRST]
    assert "How many orders are there?" not in second.prompt
    assert parents(chinook) == [(FIRST, None), (SECOND, FIRST)]
    assert parents(northwind) == [("How many orders are there?", None)]


def test_a_thread_that_outgrows_the_context_is_carried_and_the_card_says_so(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, chinook: Path
) -> None:
    """(d) With 8,192 tokens of context the thread plus a question's budget does not fit: the
    follow-up carries the earlier question as text, and its card says so, also after a relaunch."""
    use_replay(monkeypatch, n_ctx=8192)
    seen: dict[str, Any] = {}

    def outgrow(window: Any) -> None:
        page = front_page(qtbot, window, "chinook.sqlite")
        seen["first"] = ask_by_keys(qtbot, window, page, FIRST)
        click_follow_up(qtbot, page, 0)
        seen["second"] = ask_by_keys(qtbot, window, page, SECOND)
        seen["card"] = card_line(page, 1)

    assert launch(outgrow, files=[chinook]) == 0
    first, second = seen["first"], seen["second"]
    assert second.follow_up == "carried" and not second.prompt.startswith(first.prompt)
    assert f"1. {FIRST}\nSQL: {first.sql}" in second.prompt  # the documented carried form
    assert CARRIED in seen["card"]

    def look(window: Any) -> None:
        page = front_page(qtbot, window, "chinook.sqlite", episodes=2)
        seen["restored"] = card_line(page, 1)

    assert launch(look) == 0
    assert CARRIED in seen["restored"]
    assert parents(chinook) == [(FIRST, None), (SECOND, FIRST)]


def test_a_follow_up_the_history_refuses_is_not_asked_and_the_composer_says_why(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, chinook: Path, tmp_path: Path
) -> None:
    """A stored thread damaged behind the app's back, then a database changed since its answer:
    Enter asks nothing, the composer says why and goes back to a standalone question, the
    question stays in the box, and the next Enter asks it on its own."""
    use_replay(monkeypatch, n_ctx=65_536)
    db = tmp_path / "chinook.sqlite"
    shutil.copyfile(chinook, db)  # its time stamp is changed below: never the shared file's
    seen: dict[str, Any] = {}

    def journey(window: Any) -> None:
        page = front_page(qtbot, window, "chinook.sqlite")
        ask_by_keys(qtbot, window, page, FIRST)
        click_follow_up(qtbot, page, 0)
        with contextlib.closing(sqlite3.connect(paths.data_dir() / "history.sqlite")) as conn, conn:
            conn.execute(
                "UPDATE entries SET episode_json = json_set(episode_json, '$.prompt', 'half a prompt')"
            )
        type_question(qtbot, page, SECOND)
        seen["damaged"] = enter_is_refused(qtbot, page)
        with qtbot.waitSignal(window.episode_finished, timeout=60_000) as alone:
            qtbot.keyClick(page.chat.question, Qt.Key.Key_Return)  # now a standalone question
        seen["alone"] = alone.args[0]
        seen["note_after"] = page.chat.follow_note.isVisibleTo(page.chat)
        click_follow_up(qtbot, page, 1)
        info = db.stat()
        os.utime(db, ns=(info.st_atime_ns, info.st_mtime_ns + 5_000_000_000))  # as if written to
        type_question(qtbot, page, THIRD)
        seen["changed"] = enter_is_refused(qtbot, page)

    assert launch(journey, files=[db]) == 0
    damaged, changed = seen["damaged"], seen["changed"]
    assert damaged["asked"] is False and damaged["follows"] is False and damaged["box"] == SECOND
    assert damaged["note"].startswith("The follow-up was not asked: the stored thread of episode ")
    assert "is damaged" in damaged["note"] and damaged["note"].endswith("Press Enter to ask it on its own.")
    assert seen["alone"].follow_up is None and seen["alone"].question == SECOND
    assert seen["note_after"] is False  # the question that was asked took the note away
    assert changed["asked"] is False and changed["follows"] is False and changed["box"] == THIRD
    assert "the database chinook.sqlite has changed since episode" in changed["note"]
    assert "ask a standalone question" in changed["note"]


def test_a_follow_up_on_another_models_answer_is_refused_after_a_relaunch(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, chinook: Path
) -> None:
    """A thread is continued only by the model that wrote it: relaunched with another model, a
    follow-up on the restored answer is not asked, and the composer names both models."""
    use_replay(monkeypatch, n_ctx=65_536)
    seen: dict[str, Any] = {}

    def ask(window: Any) -> None:
        seen["first"] = ask_by_keys(qtbot, window, front_page(qtbot, window, "chinook.sqlite"), FIRST)

    assert launch(ask, files=[chinook]) == 0
    use_replay(monkeypatch, n_ctx=65_536, model_file="another-model.gguf")

    def follow_up_with_another_model(window: Any) -> None:
        page = front_page(qtbot, window, "chinook.sqlite", episodes=1)
        click_follow_up(qtbot, page, 0)
        type_question(qtbot, page, SECOND)
        seen["refused"] = enter_is_refused(qtbot, page)
        seen["alone"] = ask_by_keys(qtbot, window, page, "")  # Enter again: asked on its own

    assert launch(follow_up_with_another_model) == 0
    refused = seen["refused"]
    assert refused["asked"] is False and refused["follows"] is False and refused["box"] == SECOND
    assert "was answered by replay, not by replay: another-model.gguf" in refused["note"]
    assert seen["alone"].follow_up is None and seen["alone"].question == SECOND
    assert parents(chinook) == [(FIRST, None), (SECOND, None)]


@pytest.mark.slow
def _prefetched_tokens(caplog: pytest.LogCaptureFixture) -> int:
    """What the prefetch that clicking Follow up started evaluated (the agent thread logs it
    before it runs the follow-up; 0 where none ran): the first such record since the last clear."""
    for record in caplog.records:
        message = record.getMessage()
        if message.startswith("follow-up prefetched:"):
            assert "(cancelled)" not in message, message
            assert isinstance(record.args, tuple)
            return int(record.args[0])
    return 0


def _assert_only_new_tokens_evaluated(follow_up: Episode, prefetched: int) -> None:
    """The prefetch and the follow-up together evaluated the follow-up's new tokens, and nothing of
    the thread again.  The prefetch's guess of the turn's start can end one token into what the
    question's first characters change (seen once with sampled SmolLM2 threads in CI): that token
    is evaluated again, so one token over is allowed; the thread again would be all its tokens."""
    new = follow_up.stats.prompt_tokens - follow_up.stats.thread_tokens
    assert new <= prefetched + follow_up.stats.evaluated_tokens <= new + 1
    assert follow_up.stats.thread_tokens > 1


def test_smollm2_continues_its_thread_without_evaluating_it_again_also_after_a_relaunch(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, chinook: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The real engine path: SmolLM2 registered and chosen in the settings, short budgets (it
    is not a SQL agent; what is checked is the thread, not the answer).  A follow-up evaluates
    only its new tokens, in the same launch and after a relaunch (the thread's saved state):
    part of them while the question is typed (the prefetch Follow up starts), the rest at Enter,
    and together exactly the new tokens, so the thread is never evaluated again."""
    caplog.set_level(logging.INFO, logger="sqale_desktop.ui.agent_runner")
    from sqale_desktop.core import settings as settings_mod
    from sqale_desktop.core.agent import protocol as protocol_files
    from sqale_desktop.core.agent.protocol import AgentProtocol
    from sqale_desktop.core.models.registry import Registry

    record = Registry().import_file(smollm2_gguf())
    settings_mod.save(
        dataclasses.replace(
            settings_mod.Settings(), model_id=record.id, n_ctx=4096, n_threads=1, gpu_layers="none"
        )
    )
    brief = dataclasses.replace(
        AgentProtocol(),
        system_prompt="Answer questions about a SQLite database.",
        tool_turns=1,
        tool_turn_tokens=24,
        final_turn_tokens=24,
        episode_tokens=600,
    )
    monkeypatch.setattr(protocol_files, "load_protocol", lambda _model_dir=None: brief)
    seen: dict[str, Any] = {}

    def ask_and_follow_up(window: Any) -> None:
        page = front_page(qtbot, window, "chinook.sqlite")
        seen["first"] = ask_by_keys(qtbot, window, page, "How many artists are there?")
        click_follow_up(qtbot, page, 0)
        seen["second"] = ask_by_keys(qtbot, window, page, "And how many albums?")
        seen["card"] = card_line(page, 1)

    assert launch(ask_and_follow_up, files=[chinook]) == 0
    first, second = seen["first"], seen["second"]
    assert first.ended_by not in ("error", "cancelled"), first.error
    assert second.follow_up == "continued" and second.prompt.startswith(first.prompt)
    assert CONTINUED in seen["card"]
    assert second.stats.thread_tokens == first.stats.prompt_tokens
    _assert_only_new_tokens_evaluated(second, _prefetched_tokens(caplog))
    caplog.clear()

    def after_relaunch(window: Any) -> None:
        page = front_page(qtbot, window, "chinook.sqlite", episodes=2)
        click_follow_up(qtbot, page, 1)
        seen["third"] = ask_by_keys(qtbot, window, page, "Which one is the oldest?")

    assert launch(after_relaunch) == 0
    third = seen["third"]
    assert third.follow_up == "continued" and third.prompt.startswith(second.prompt)
    assert third.earlier_questions == ["How many artists are there?", "And how many albums?"]
    _assert_only_new_tokens_evaluated(third, _prefetched_tokens(caplog))
