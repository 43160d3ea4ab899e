"""The harness end to end with replay engines: gold replay scores 100 %, wrong answers 0 %, resume."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.eval.conditions import Condition
from sqale_desktop.core.eval.harness import EvalRun, RunOptions
from sqale_desktop.core.eval.questions import EvalQuestion, load_question_set
from sqale_desktop.core.eval.records import EPISODES_FILE, finished_keys, read_episodes
from sqale_desktop.core.eval.replay import gold_script, load_scripts, replay_engine_for, submit_completion
from sqale_desktop.core.runtime import ModelChoice, episode_fn, resolve
from sqale_desktop.core.settings import Settings
from tests.helpers import shared_data


def _spider() -> list[EvalQuestion]:
    return load_question_set(shared_data("text2sql/spider/questions.json")).questions


def _run(tmp_path: Path, engine_for, *, protocol: AgentProtocol | None = None, **options) -> EvalRun:  # type: ignore[no-untyped-def]
    runtime = resolve(Settings(), ModelChoice("replay"))
    return EvalRun(
        tmp_path / "run",
        engine_for,
        episode_fn(Settings(), protocol or AgentProtocol()),
        runtime.open_database,
        RunOptions(**options),
        cache=tmp_path / "cache",
    )


@pytest.mark.slow
def test_gold_replay_scores_100_percent_on_the_972_spider_questions(tmp_path: Path) -> None:
    questions = _spider()
    assert len(questions) == 972
    records = list(_run(tmp_path, replay_engine_for(gold_script), concurrency=2).run(questions))
    assert len(records) == 972
    wrong = [(r.id, r.pred_error, r.gold_error) for r in records if not r.correct]
    assert wrong == []
    assert {r.ended_by for r in records} == {"submit_sql"}
    assert len(read_episodes(tmp_path / "run")) == 972


def test_wrong_but_valid_answers_score_0_percent(tmp_path: Path) -> None:
    questions = _spider()[::4]  # every database family, a quarter of the questions

    def wrong(question: EvalQuestion) -> list[str]:
        return [submit_completion(f"SELECT 'not the answer to {question.key}'")]

    records = list(_run(tmp_path, replay_engine_for(wrong), concurrency=2).run(questions))
    assert len(records) == len(questions)
    assert not any(r.correct for r in records)
    assert all(r.pred_error is None and r.ended_by == "submit_sql" for r in records)  # valid SQL
    assert all(r.f1 == 0.0 for r in records)


def test_final_turn_text_episodes_score_by_the_same_rules(tmp_path: Path) -> None:
    questions = _spider()[:120:3]
    protocol = replace(AgentProtocol(), tool_turns=1)
    explore = '<think>\nLook first.\n</think>\n\n{"tool": "list_tables", "args": {}}'

    def final_text(question: EvalQuestion) -> list[str]:
        return [explore, f"<think>\nDone.\n</think>\n\n```sql\n{question.gold_sql}\n```"]

    right = list(_run(tmp_path, replay_engine_for(final_text), protocol=protocol).run(questions))
    assert {r.ended_by for r in right} == {"final_turn"}
    assert all(r.correct for r in right) and all(r.rounds == 2 for r in right)

    def final_wrong(question: EvalQuestion) -> list[str]:
        return [explore, "<think>\nDone.\n</think>\n\n```sql\nSELECT 'no such answer'\n```"]

    wrong = list(_run(tmp_path / "w", replay_engine_for(final_wrong), protocol=protocol).run(questions))
    assert {r.ended_by for r in wrong} == {"final_turn"} and not any(r.correct for r in wrong)


def test_episode_fields(tmp_path: Path) -> None:
    question = next(q for q in _spider() if "'France'" in q.gold_sql)
    script = [
        '<think>\nx\n</think>\n\n{"tool": "describe_table", "args": {"table_name": "SINGER"}}\n'
        '{"tool": "describe_table", "args": {"table_name": "SINGER"}}',
        "<think>\nx\n</think>\n\n"
        '{"tool": "distinct_values", "args": {"table_name": "singer", "column_name": "Country"}}',
        submit_completion(question.gold_sql),
    ]
    (record,) = _run(
        tmp_path, lambda q, i: ReplayEngine(script), condition=Condition("gold"), parameters=2e9
    ).run([question])
    assert record.id == question.id and record.condition == "gold" and record.correct
    assert record.rounds == 3
    assert record.tool_calls == {"total": 4, "distinct": 3, "per_round": [2, 1, 1]}
    assert record.gold_tables == ["singer"] and record.gold_tables_opened is True
    assert record.literals == 1 and record.literals_seen == 1.0  # 'France' was in distinct_values
    tokens = record.tokens
    assert tokens["prompt"] > 0 and tokens["completion"] > 0
    assert record.tflops == pytest.approx(2 * 2e9 * tokens["evaluated"] / 1e12)
    assert record.trace is not None and record.trace["turns"][0]["calls"][0]["tool"] == "describe_table"
    assert record.trace["db"] == question.db_id  # not the reduced copy's path in the cache
    saved = json.loads((tmp_path / "run" / EPISODES_FILE).read_text(encoding="utf-8"))
    assert saved["id"] == record.id and saved["trace"]["sql"] == question.gold_sql


def test_resume_runs_only_unfinished_questions_and_retries_errors(tmp_path: Path) -> None:
    questions = _spider()[:8]
    first = list(_run(tmp_path, replay_engine_for(gold_script)).run(questions[:5]))
    assert [r.id for r in first] == [0, 1, 2, 3, 4]
    broken = EvalQuestion("broken", "x", tmp_path / "missing.sqlite", "?", "SELECT 1")
    second = list(_run(tmp_path, replay_engine_for(gold_script), concurrency=3).run([*questions, broken]))
    assert sorted(r.id for r in second if r.id != "broken") == [5, 6, 7]
    assert next(r for r in second if r.id == "broken").ended_by == "error"
    assert ("full", "broken") not in finished_keys(tmp_path / "run")
    third = list(_run(tmp_path, replay_engine_for(gold_script)).run([*questions, broken]))
    assert [r.id for r in third] == ["broken"]  # only the errored one is tried again
    assert len(read_episodes(tmp_path / "run")) == 10


def test_cancel_stops_the_run_and_records_no_cancelled_episode(tmp_path: Path) -> None:
    questions = _spider()[:30]
    run = _run(
        tmp_path,
        lambda q, i: ReplayEngine([submit_completion(q.gold_sql)], chunk_chars=2, delay=0.02),
        concurrency=2,
    )
    seen = []
    for record in run.run(questions):
        seen.append(record)
        if len(seen) == 1:
            threading.Thread(target=run.cancel).start()
    assert run.cancelled and 1 <= len(seen) < 30
    assert all(r["ended_by"] == "submit_sql" for r in read_episodes(tmp_path / "run"))
    assert len(read_episodes(tmp_path / "run")) == len(seen)


def test_replay_script_files(tmp_path: Path) -> None:
    as_object = tmp_path / "s.json"
    as_object.write_text(json.dumps({"1": ["a"], "2": ["b", "c"]}), encoding="utf-8")
    assert load_scripts(as_object) == {"1": ["a"], "2": ["b", "c"]}
    as_lines = tmp_path / "s.jsonl"
    as_lines.write_text(
        '{"id": 1, "completions": ["a"]}\n{"id": 2, "completions": ["b"]}\n', encoding="utf-8"
    )
    assert load_scripts(as_lines) == {"1": ["a"], "2": ["b"]}
    from sqale_desktop.core.engines.base import EngineError

    as_lines.write_text('{"id": 1}\n', encoding="utf-8")
    with pytest.raises(EngineError, match="must map question ids"):
        load_scripts(as_lines)


def test_a_bug_in_one_episode_becomes_an_error_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    questions = _spider()[:3]

    def engine_for(question: EvalQuestion, index: int) -> ReplayEngine:
        if question.id == 1:
            raise RuntimeError("boom")
        return ReplayEngine(gold_script(question))

    records = list(_run(tmp_path, engine_for).run(questions))
    by_id = {r.id: r for r in records}
    assert by_id[0].correct and by_id[2].correct
    assert by_id[1].ended_by == "error" and by_id[1].error == "internal error: RuntimeError: boom"
    assert "evaluating question 1 failed" in caplog.text
