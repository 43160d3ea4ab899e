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
