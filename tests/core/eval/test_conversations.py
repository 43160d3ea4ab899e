"""Conversational sets: the SParC/CoSQL layout, the hand-written set, and the three conditions."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from sqale_desktop.core import runtime
from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.eval.conversations import (
    FOLLOW_UPS,
    load_conversations,
    parse_follow_ups,
    summarise,
)
from sqale_desktop.core.eval.harness import EvalRun, RunOptions
from sqale_desktop.core.eval.question_types import EvalQuestion, QuestionSetError
from sqale_desktop.core.eval.records import read_episodes
from sqale_desktop.core.eval.scorer import Scorer
from sqale_desktop.core.settings import Settings
from tests.helpers import SHARED_DATA, shared_data

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
            scorer, gold = Scorer("spider"), interaction.turns[0].gold_sql
            assert scorer.score(interaction.db_path, gold, gold).correct
            assert not scorer.score(interaction.db_path, gold, "SELECT 1").correct
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


def test_the_three_conditions_ask_follow_ups_their_own_way(tmp_path: Path) -> None:
    shared_data("sample/chinook.sqlite")
    interactions, _ = load_conversations(SET, SHARED_DATA)
    interaction = next(i for i in interactions if i.id == "chinook-invoices")
    final = interaction.turns[-1].gold_sql
    script = [
        "Tables.\n</think>\n\n" + json.dumps({"tool": "list_tables", "args": {}}),
        "Answer.\n</think>\n\n" + json.dumps({"tool": "submit_sql", "args": {"sql": final}}),
    ]

    def engine_for(question: EvalQuestion, index: int) -> ReplayEngine:
        return ReplayEngine(script, n_ctx=65536)

    settings = Settings()
    run = EvalRun(
        tmp_path / "run", engine_for, runtime.episode_fn(settings), runtime.resolve(settings).open_database,
        RunOptions(metric="spider"), cache=tmp_path / "cache",
    )  # fmt: skip
    records = list(run.run_conversations([interaction], FOLLOW_UPS))
    forms = {
        c: [r.conversation.follow_up for r in records if r.condition == c and r.conversation]
        for c in FOLLOW_UPS
    }
    assert forms == {
        "standalone": ["standalone"] * 3,
        "continued": ["standalone", "continued", "continued"],
        "carried": ["standalone", "carried", "carried"],
    }
    saved = read_episodes(tmp_path / "run")
    assert [(r["id"], r["interaction"], r["turn"]) for r in saved[:3]] == [
        ("chinook-invoices/1", "chinook-invoices", 1),
        ("chinook-invoices/2", "chinook-invoices", 2),
        ("chinook-invoices/3", "chinook-invoices", 3),
    ]
    summary = summarise(saved)
    for condition in FOLLOW_UPS:
        assert summary[condition]["by_position"] == {
            "1": {"n": 1, "accuracy": 0.0},
            "2": {"n": 1, "accuracy": 0.0},
            "3": {"n": 1, "accuracy": 1.0},
        }
    # a continued follow-up evaluates only what it adds; a standalone or carried one its whole prompt
    continued = summary["continued"]["evaluated_tokens_per_follow_up"]
    assert continued < summary["standalone"]["evaluated_tokens_per_follow_up"]
    assert continued < summary["carried"]["evaluated_tokens_per_follow_up"]
    # every turn finished: a second pass asks nothing again
    assert list(run.run_conversations([interaction], FOLLOW_UPS)) == []


def test_a_failed_turn_is_wrong_and_the_next_follows_up_the_last_finished_answer(tmp_path: Path) -> None:
    shared_data("sample/chinook.sqlite")
    interactions, _ = load_conversations(SET, SHARED_DATA)
    interaction = next(i for i in interactions if i.id == "chinook-invoices")
    first = interaction.turns[0].gold_sql

    def engine_for(question: EvalQuestion, index: int) -> ReplayEngine:
        if question.key.endswith("/2"):
            raise RuntimeError("boom")
        return ReplayEngine(
            [f'</think>\n\n{{"tool": "submit_sql", "args": {{"sql": {json.dumps(first)}}}}}'], n_ctx=65536
        )

    settings = Settings()
    run = EvalRun(
        tmp_path / "run", engine_for, runtime.episode_fn(settings), runtime.resolve(settings).open_database,
        RunOptions(metric="spider"), cache=tmp_path / "cache",
    )  # fmt: skip
    records = list(run.run_conversations([interaction], ["continued"]))
    assert [(r.ended_by, r.correct) for r in records] == [
        ("submit_sql", True), ("error", False), ("submit_sql", False)
    ]  # fmt: skip
    assert records[1].error == "internal error: RuntimeError: boom"
    assert records[2].trace is not None and records[2].trace["earlier_questions"] == [
        interaction.turns[0].utterance
    ]
    # an interaction with a failed turn is asked again whole
    again = [r.id for r in run.run_conversations([interaction], ["continued"])]
    assert again == ["chinook-invoices/1", "chinook-invoices/2", "chinook-invoices/3"]


def test_follow_up_conditions_are_read_in_order_once_each() -> None:
    assert parse_follow_ups("carried, standalone,carried") == ["carried", "standalone"]
    with pytest.raises(ValueError, match="'threaded'"):
        parse_follow_ups("continued,threaded")
