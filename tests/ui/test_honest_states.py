"""The chat says what happened: outcomes agree between card and status bar, turns say when they
wrote no call or were cut, live speed counts from the first token, settings that do not concern
the model keep it loaded, and a model that is not a SQaLe agent is flagged before any question."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.history import History
from sqale_desktop.core.runtime import Runtime
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.chat_widgets import NO_CALL_NOTE, cut_note, ended_by_status
from sqale_desktop.ui.main_window import MainWindow
from tests.ui.replay_scripts import CHINOOK_ANSWER_SQL, call, chinook_script, turn
from tests.ui.runtimes import scripted
from tests.ui.windows import WindowFactory, ask, open_page, settle, smollm2


def test_no_answer_is_said_alike_on_the_card_and_in_the_status_bar(
    qtbot: Any, make_window: WindowFactory, chinook: Path, artifacts: Path
) -> None:
    # Six turns of prose without a tool call, then a final turn without SQL: no answer.
    script = [f"Turn {n}: I am not sure what to do.\n</think>\n\nThe answer is unclear." for n in range(6)]
    script.append("Still unsure.\n</think>\n\nI cannot answer.")
    window = make_window(script)
    page = open_page(qtbot, window, chinook)
    with qtbot.waitSignal(window.episode_finished, timeout=20_000) as blocker:
        view = ask(qtbot, window, page)
    episode = blocker.args[0]
    assert episode.ended_by == "no_answer"
    assert view.answer is not None
    assert view.answer.heading.text() == "<b>No answer</b>"
    assert window.status.message_label.text() == ended_by_status("no_answer")
    assert "Answer ready" not in window.status.message_label.text()
    assert view.progress.text().startswith("no answer ·")
    tool_turns = [t for t in view.turns.values() if not t.final]
    assert len(tool_turns) == 6
    assert all(NO_CALL_NOTE in t.notes for t in tool_turns)
    final = [t for t in view.turns.values() if t.final]
    assert len(final) == 1 and NO_CALL_NOTE not in final[0].notes
    window.resize(1024, 700)
    settle()
    window.grab().save(str(artifacts / "no_answer.png"))


def test_a_stopped_episode_is_headed_stopped_and_the_next_one_does_not_show_it(
    qtbot: Any, make_window: WindowFactory, chinook: Path
) -> None:
    window = make_window(chinook_script(thinking_words=200), delay=0.02)
    page = open_page(qtbot, window, chinook)
    view = ask(qtbot, window, page)
    qtbot.waitUntil(lambda: len(view.tool_cards()) >= 1, timeout=10_000)
    with qtbot.waitSignal(window.episode_finished, timeout=10_000):
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    assert view.answer is not None and view.answer.heading.text() == "<b>Stopped</b>"
    assert view.progress.text().startswith("stopped ·") and "done" not in view.progress.text()
    assert window.status.message_label.text() == "Stopped."

    second = ask(qtbot, window, page)
    assert window.status.message_label.text() == "The agent is working in chinook.sqlite…"
    qtbot.waitUntil(lambda: bool(second.turns), timeout=10_000)
    assert "Stopped" not in window.status.message_label.text()
    with qtbot.waitSignal(window.episode_finished, timeout=30_000):
        window.stop(page)


def test_live_speed_counts_from_the_first_streamed_token(
    qtbot: Any, make_window: WindowFactory, chinook: Path
) -> None:
    window = make_window(chinook_script(thinking_words=400), delay=0.01)
    page = open_page(qtbot, window, chinook)
    view = ask(qtbot, window, page)
    # Mid-way through the first turn (no TurnFinished yet), with text on screen, the rate is real.
    qtbot.waitUntil(lambda: (view.live_tokens_per_second() or 0.0) > 0.0, timeout=10_000)
    first = view.turns[1]
    assert first.summary == "" and first.thinking.plain_text()
    page.chat.refresh_progress()
    assert "0.0 tok/s" not in view.progress.text() and "tok/s" in view.progress.text()
    assert "0.0 tok/s" not in page.chat.live.text()
    with qtbot.waitSignal(window.episode_finished, timeout=30_000):
        window.stop(page)


def test_a_turn_cut_by_its_token_budget_says_so(
    qtbot: Any, make_window: WindowFactory, chinook: Path
) -> None:
    rambling = " ".join(["Let me think about the albums again."] * 400)  # far past 2,048 tokens
    script = [rambling, turn("Now I know.", call("submit_sql", sql=CHINOOK_ANSWER_SQL))]
    window = make_window(script)
    page = open_page(qtbot, window, chinook)
    with qtbot.waitSignal(window.episode_finished, timeout=20_000) as blocker:
        view = ask(qtbot, window, page)
    assert blocker.args[0].turns[0].finish_reason == "length"
    assert cut_note(2048) in view.turns[1].notes
    assert NO_CALL_NOTE in view.turns[1].notes  # nothing parsable was written either
    assert view.turns[2].notes == []
    assert window.status.message_label.text() == ended_by_status("submit_sql")
    assert "submitted by the model" in view.answer.heading.text()


def test_settings_that_do_not_concern_the_model_keep_it_loaded(
    qtbot: Any, tmp_path: Path, chinook: Path
) -> None:
    built: list[int] = []

    def resolve(settings: Settings) -> Runtime:
        def factory() -> ReplayEngine:
            built.append(settings.n_ctx)
            return ReplayEngine(chinook_script(thinking_words=10))

        return scripted(factory, settings)

    history = History(tmp_path / "h.sqlite")
    window = MainWindow(Settings(), history=history, resolve=resolve)
    qtbot.addWidget(window)
    try:
        page = open_page(qtbot, window, chinook)
        with qtbot.waitSignal(window.episode_finished, timeout=20_000):
            ask(qtbot, window, page)
        assert len(built) == 1
        changed = dataclasses.replace(
            window.settings, theme="dark", max_rows=10, query_time_limit_s=3.0, temperature=0.2, top_k=5
        )
        window.apply_settings(changed)
        with qtbot.waitSignal(window.episode_finished, timeout=20_000) as blocker:
            ask(qtbot, window, page)
        assert len(built) == 1, "the model was rebuilt for a change that does not concern it"
        result = blocker.args[0].result
        assert result is not None and result.row_count <= 10  # the new max_rows applied

        window.apply_settings(dataclasses.replace(window.settings, n_ctx=8192))
        with qtbot.waitSignal(window.episode_finished, timeout=20_000):
            ask(qtbot, window, page)
        assert built == [16384, 8192]
    finally:
        window.apply_settings(dataclasses.replace(window.settings, theme="system"))
        assert window.shutdown()


def test_a_model_that_is_not_an_agent_is_flagged_before_the_first_question(
    qtbot: Any, tmp_path: Path, artifacts: Path
) -> None:
    from sqale_desktop.core.models.registry import Registry
    from sqale_desktop.core.runtime import resolve

    record = Registry().import_file(smollm2())
    settings = Settings(model_id=record.id)
    history = History(tmp_path / "h.sqlite")
    window = MainWindow(settings, history=history, resolve=resolve)  # as the app builds it
    qtbot.addWidget(window)
    try:
        with qtbot.waitSignal(window.model_checked, timeout=10_000) as blocker:
            window.settings_changed()  # the models changed: the runtime is resolved again
        assert blocker.args[0].architecture == "llama"
        texts = window.model_banners.texts()
        assert "not one of the SQaLe agents" in texts["fitness"]
        assert "will most likely answer nothing" in texts["fitness"]
        # SmolLM2 was trained for 8,192 tokens; the default 16,384 is clamped, and the window says so.
        assert "16,384" in texts["context"] and "8,192" in texts["context"]
        assert window.model_banners.isVisible() or not window.isVisible()
        window.resize(1024, 700)
        window.show()
        settle()
        window.grab().save(str(artifacts / "model_not_an_agent.png"))
    finally:
        assert window.shutdown()
