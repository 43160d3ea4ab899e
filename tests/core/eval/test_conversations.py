"""Conversational sets: the SParC/CoSQL layout, the hand-written set, and the three conditions."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

import pytest

from sqale_desktop.core import runtime
from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.eval.conversations import (
    CONDITIONS,
    TurnResult,
    load_conversations,
    matches,
    run_interaction,
    summarise,
)
from sqale_desktop.core.eval.question_types import QuestionSetError
from sqale_desktop.core.settings import Settings
from tests.conftest import SHARED_DATA, shared_data

SET = Path(__file__).parent / "data" / "followups.json"


def test_the_hand_written_set_holds_ten_interactions_of_three_turns_whose_gold_runs() -> None:
    for name in ("chinook", "northwind", "sakila"):
        shared_data(f"sample/{name}.sqlite")  # fails under CI when the data is missing
    interactions, notes = load_conversations(SET, SHARED_DATA)
    assert notes == [] and len(interactions) >= 10
    assert {i.db_id for i in interactions} == {"chinook", "northwind", "sakila"}
    for interaction in interactions:
        assert len(interaction.turns) >= 3
        db = open_readonly(interaction.db_path)
        try:
            results = [db.execute(turn.gold_sql, max_rows=100_000) for turn in interaction.turns]
            assert all(result.rows for result in results), interaction.id
            # each follow-up asks for something else than the turn before it
            assert all(a.rows != b.rows or a.columns != b.columns for a, b in itertools.pairwise(results)), (
                interaction.id
            )
            assert matches(db, interaction.turns[0].gold_sql, interaction.turns[0].gold_sql)
            assert not matches(db, interaction.turns[0].gold_sql, "SELECT 1")
        finally:
            db.close()


def test_the_sparc_layout_reads_database_ids_beside_the_file(tmp_path: Path, chinook: Path) -> None:
    (tmp_path / "database" / "chinook").mkdir(parents=True)
    (tmp_path / "database" / "chinook" / "chinook.sqlite").write_bytes(chinook.read_bytes())
    sparc = tmp_path / "dev.json"
    sparc.write_text(
        json.dumps(
            [
                {"database_id": "chinook", "interaction": [{"utterance": "Artists?", "query": "SELECT 1"}]},
                {"database_id": "missing", "interaction": [{"utterance": "Q?", "query": "SELECT 1"}]},
            ]
        )
    )
    interactions, notes = load_conversations(sparc)
    assert [i.db_id for i in interactions] == ["chinook"] and notes == [
        "1 interactions skipped: their database file is missing"
    ]
    sparc.write_text(json.dumps([{"database_id": "chinook", "interaction": []}]))
    with pytest.raises(QuestionSetError, match="non-empty interaction"):
        load_conversations(sparc)


def test_the_three_conditions_ask_follow_ups_their_own_way() -> None:
    shared_data("sample/chinook.sqlite")
    interactions, _ = load_conversations(SET, SHARED_DATA)
    interaction = next(i for i in interactions if i.id == "chinook-invoices")
    final = interaction.turns[-1].gold_sql
    script = [
        "Tables.\n</think>\n\n" + json.dumps({"tool": "list_tables", "args": {}}),
        "Answer.\n</think>\n\n" + json.dumps({"tool": "submit_sql", "args": {"sql": final}}),
    ]
    episode = runtime.episode_fn(Settings())
    results: list[TurnResult] = []
    db = open_readonly(interaction.db_path)
    try:
        for condition in CONDITIONS:
            engine = ReplayEngine(script, n_ctx=65536)
            results += run_interaction(episode, engine, db, interaction, condition, threading.Event())
    finally:
        db.close()
    forms = {c: [r.form for r in results if r.condition == c] for c in CONDITIONS}
    assert forms == {
        "standalone": ["standalone"] * 3,
        "continued": ["standalone", "continued", "continued"],
        "carried": ["standalone", "carried", "carried"],
    }
    summary = summarise(results)
    for condition in CONDITIONS:
        assert summary[condition]["by_position"] == {
            "1": {"n": 1, "accuracy": 0.0},
            "2": {"n": 1, "accuracy": 0.0},
            "3": {"n": 1, "accuracy": 1.0},
        }
    # a continued follow-up evaluates only what it adds; a standalone or carried one its whole prompt
    continued = summary["continued"]["evaluated_tokens_per_follow_up"]
    assert continued < summary["standalone"]["evaluated_tokens_per_follow_up"]
    assert continued < summary["carried"]["evaluated_tokens_per_follow_up"]
