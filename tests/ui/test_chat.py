"""The chat's pieces built from events: bounded widgets, collapsing, tool results for people."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QLabel, QTableView, QWidget

from sqale_desktop.core.agent.events import (
    BudgetUpdated,
    Episode,
    EpisodeEnded,
    QueryResultData,
    TextDelta,
    ToolCalled,
    ToolResulted,
    TurnFinished,
    TurnStarted,
)
from sqale_desktop.core.tools.payloads import (
    DDLPayload,
    JoinPathPayload,
    JoinStep,
    RowsPayload,
    TablesPayload,
)
from sqale_desktop.ui.chat_pane import ChatPane
from sqale_desktop.ui.chat_widgets import join_chain
from sqale_desktop.ui.sql_editor import SqlEditor


def make_pane(qtbot: Any) -> ChatPane:
    pane = ChatPane()
    qtbot.addWidget(pane)
    pane.resize(700, 900)
    pane.show()
    return pane


def test_streaming_text_appends_to_one_widget(qtbot: Any) -> None:
    pane = make_pane(qtbot)
    view = pane.begin("How many tracks?")
    pane.apply([TurnStarted(1, False, 6), TextDelta(1, "start ", "think")])
    widgets = len(view.findChildren(QWidget))
    pane.apply([TextDelta(1, f"word{i} ", "think") for i in range(300)])
    assert len(view.findChildren(QWidget)) == widgets
    assert view.turns[1].thinking.plain_text().startswith("start word0 word1")
    assert view.turns[1].thinking.expanded
    pane.apply([TextDelta(1, " done</think>", "think"), TextDelta(1, '\n{"tool": "list_tables"}', "answer")])
    assert view.turns[1].thinking.plain_text().endswith('word299  done\n{"tool": "list_tables"}')


def test_turns_collapse_and_budget_and_speed_are_shown(qtbot: Any) -> None:
    pane = make_pane(qtbot)
    view = pane.begin("q")
    pane.apply([TurnStarted(1, False, 6), TextDelta(1, "thinking", "think")])
    pane.apply([TurnFinished(1, 120, 2.0, 60.0), BudgetUpdated(5, 0, 900, "[5 tool turns left]")])
    assert not view.turns[1].thinking.expanded
    assert "5 tool turns left" in view.progress.text() and "60.0 tok/s" in view.progress.text()
    pane.apply([TurnStarted(2, True, 0)])
    assert "final turn" in view.turns[2].header.text()
    episode = Episode(question="q", db="x", sql="select 1", ended_by="final_turn")
    episode.result = QueryResultData(columns=["1"], rows=[[1]], row_count=1)
    pane.apply([EpisodeEnded(episode)])
    pane.end(episode)
    assert view.answer is not None
    assert "answered in the final turn" in view.answer.heading.text()
    assert "1 row ·" in view.answer.details.text() and "tok/s" in view.answer.details.text()
    assert view.answer.sql == "SELECT 1"
    assert pane.current is None and pane.ask_button.isEnabled()


def test_a_turn_that_drafted_says_how_much_the_model_kept(qtbot: Any) -> None:
    pane = make_pane(qtbot)
    view = pane.begin("q")
    pane.apply([TurnStarted(1, False, 6), TextDelta(1, "t", "think")])
    pane.apply([TurnFinished(1, 120, 2.0, 60.0, drafted_tokens=52, accepted_tokens=40)])
    pane.apply([TurnStarted(2, False, 5), TextDelta(1, "u", "think")])
    pane.apply([TurnFinished(2, 80, 2.0, 40.0)])
    assert "120 tokens, 60.0 tok/s, 40/52 drafted kept" in view.turns[1].header.text()
    assert "drafted" not in view.turns[2].header.text()  # speculation off or nothing copied


def test_tool_results_are_rendered_for_people(qtbot: Any) -> None:
    pane = make_pane(qtbot)
    view = pane.begin("q")
    rows = RowsPayload(["name", "n"], [("Iron Maiden", 21), (None, 3)], row_count=2, truncated=False)
    ddl = DDLPayload("Artist", "CREATE TABLE Artist (ArtistId INTEGER PRIMARY KEY, Name TEXT)")
    path = JoinPathPayload(
        ["Artist", "Album", "Track"],
        [
            JoinStep("Artist", "Album", (("ArtistId", "ArtistId"),)),
            JoinStep("Album", "Track", (("AlbumId", "AlbumId"),)),
        ],
    )
    events: list[Any] = [TurnStarted(1, False, 6)]
    for index, (tool, payload) in enumerate(
        [
            ("run_query", rows),
            ("describe_table", ddl),
            ("join_path", path),
            ("list_tables", TablesPayload(["a", "b"])),
        ]
    ):
        events.append(ToolCalled(1, index, tool, {}))
        events.append(ToolResulted(1, index, tool, "text the model saw", True, 0.01, payload))
    events.append(ToolCalled(1, 4, "run_query", {"sql": "SELEC"}))
    events.append(ToolResulted(1, 4, "run_query", "Error: near SELEC: syntax error", False, 0.0, None))
    pane.apply(events)
    cards = view.tool_cards()
    table = cards[0].result_view.findChild(QTableView) if cards[0].result_view else None
    assert table is not None
    model = table.model()
    assert model.data(model.index(0, 0)) == "Iron Maiden" and model.data(model.index(1, 0)) == "NULL"
    assert isinstance(cards[1].result_view, SqlEditor) and "CREATE TABLE Artist" in cards[1].result_view.sql()
    assert isinstance(cards[2].result_view, QLabel)
    assert cards[2].result_view.text() == join_chain(path)
    assert (
        join_chain(path)
        == "Artist —(Artist.ArtistId = Album.ArtistId)→ Album —(Album.AlbumId = Track.AlbumId)→ Track"
    )
    assert isinstance(cards[3].result_view, QLabel) and cards[3].result_view.text() == "a, b"
    assert cards[4].ok is False and "error" in cards[4].status.text()


def test_turn_notes_say_what_the_events_state(qtbot: Any) -> None:
    """The notes come from the events: a sqale_agent.py with a 700-token turn budget is cut at 700,
    not at the built-in 2,048, and a turn the episode's budget cut says so."""
    from sqale_desktop.ui.chat_widgets import NO_CALL_NOTE, cut_note
    from sqale_desktop.ui.episode_view import budget_note

    pane = make_pane(qtbot)
    view = pane.begin("q")
    pane.apply([TurnStarted(1, False, 6), TextDelta(1, "ramble", "think", tokens=1)])
    pane.apply([TurnFinished(1, 700, 2.0, 350.0, finish_reason="length", max_tokens=700, cut_by="turn",
                             no_tool_call=True)])  # fmt: skip
    pane.apply([BudgetUpdated(5, 0, 900, "[5 tool turns left]"), TurnStarted(2, False, 5)])
    pane.apply([TurnFinished(2, 120, 1.0, 120.0, finish_reason="length", max_tokens=120, cut_by="episode")])
    pane.apply([TurnStarted(3, True, 0), TurnFinished(3, 30, 1.0, 30.0, max_tokens=3072)])
    assert view.turns[1].notes == [cut_note(700), NO_CALL_NOTE]
    assert view.turns[2].notes == [budget_note(120, "episode")] and "episode" in view.turns[2].notes[0]
    assert view.turns[3].notes == []


def test_a_restored_episode_shows_the_notes_its_record_states(qtbot: Any) -> None:
    from sqale_desktop.core.agent.events import TurnRecord
    from sqale_desktop.ui.chat_widgets import NO_CALL_NOTE, cut_note
    from sqale_desktop.ui.episode_view import EpisodeView

    turns = [
        TurnRecord("ramble", completion_tokens=700, finish_reason="length", final=False, max_tokens=700,
                   cut_by="turn", no_tool_call=True),
        TurnRecord("SELECT 1", completion_tokens=5, final=True, max_tokens=3072, no_tool_call=False),
    ]  # fmt: skip
    episode = Episode(question="q", db="x", sql="SELECT 1", ended_by="final_turn", turns=turns)
    view = EpisodeView.from_record(episode)
    qtbot.addWidget(view)
    assert view.turns[1].notes == [cut_note(700), NO_CALL_NOTE]
    assert view.turns[2].final and view.turns[2].notes == []
