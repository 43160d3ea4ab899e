"""Damaged run files and hostile inputs get a clear message or a defined reading, never a traceback."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from sqale_desktop.core.eval.harness import RunFileError, read_run_json
from sqale_desktop.core.eval.questions import EvalQuestion, QuestionSetError, load_question_set
from sqale_desktop.core.eval.records import read_episodes
from sqale_desktop.core.eval.report import ReportError, summarise
from sqale_desktop.core.eval.scorer import Execution, Scorer, read_predictions, score_questions

DEEP = "[" * 100_000 + "]" * 100_000


def _record(qid: object, **fields: object) -> dict[str, object]:
    record: dict[str, object] = {
        "id": qid,
        "condition": "full",
        "ended_by": "answer",
        "correct": True,
        "rounds": 1,
        "tool_calls": {"total": 1, "distinct": 1, "per_round": [1]},
        "tokens": {"prompt": 10, "completion": 5, "evaluated": 15},
        "seconds": 1.0,
        "gold_tables_opened": True,
        "literals_seen": None,
        "tflops": None,
    }
    record.update(fields)
    return record


def _run_folder(tmp_path: Path, lines: bytes, run_json: str = '{"settings": {}}') -> Path:
    (tmp_path / "run.json").write_text(run_json, encoding="utf-8")
    (tmp_path / "episodes.jsonl").write_bytes(lines)
    return tmp_path


def test_a_last_line_torn_inside_a_multibyte_character_is_skipped(tmp_path: Path) -> None:
    whole = json.dumps(_record(1, question="Größe?"), ensure_ascii=False).encode()
    torn = json.dumps(_record(2, question="€€€"), ensure_ascii=False).encode()
    cut = torn[: torn.index("€".encode()) + 1]  # one byte of the three of "€"
    run = _run_folder(tmp_path, whole + b"\n" + cut)
    assert [r["id"] for r in read_episodes(run)] == [1]
    assert summarise(run).conditions[0].episodes == 1


def test_a_record_lacking_tool_calls_still_counts_in_the_report(tmp_path: Path) -> None:
    lacking = _record(1)
    del lacking["tool_calls"]
    del lacking["tokens"]
    run = _run_folder(tmp_path, (json.dumps(lacking) + "\n" + json.dumps(_record(2)) + "\n").encode())
    summary = summarise(run).conditions[0]
    assert (summary.episodes, summary.correct, summary.tool_calls) == (2, 2, [0, 1])


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", DEEP, '{"settings": []}'])
def test_a_corrupt_run_json_is_a_clear_message(tmp_path: Path, text: str) -> None:
    run = _run_folder(tmp_path, (json.dumps(_record(1)) + "\n").encode(), run_json=text)
    with pytest.raises(RunFileError, match=r"run\.json"):
        read_run_json(run)
    with pytest.raises(ReportError, match=r"run\.json"):
        summarise(run)


def test_run_json_with_invalid_utf8_is_a_clear_message(tmp_path: Path) -> None:
    run = _run_folder(tmp_path, b"")
    (run / "run.json").write_bytes(b'{"settings": "\xff"}')
    with pytest.raises(RunFileError, match=r"run\.json"):
        read_run_json(run)


def test_episodes_nested_deep_are_skipped_like_a_torn_line(tmp_path: Path) -> None:
    run = _run_folder(tmp_path, (json.dumps(_record(1)) + "\n" + DEEP + "\n").encode())
    assert [r["id"] for r in read_episodes(run)] == [1]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO item VALUES (1, 'a');"
    )
    conn.close()
    return path


@pytest.mark.parametrize("name", ["q.json", "q.jsonl"])
def test_a_question_set_nested_deep_is_a_clear_message(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(DEEP if name.endswith(".json") else '{"id": ' + DEEP + "}\n", encoding="utf-8")
    with pytest.raises(QuestionSetError, match="nested too deeply"):
        load_question_set(path)


def test_predictions_nested_deep_are_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "pred.jsonl"
    path.write_text('{"id": 1, "sql": ' + DEEP + "}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 1.*nested too deeply"):
        read_predictions(path)


def test_duplicate_question_ids_are_refused(tmp_path: Path, db: Path) -> None:
    path = tmp_path / "q.jsonl"
    rows = [{"id": qid, "db_path": db.name, "question": "q?", "gold_sql": "SELECT 1"} for qid in (1, 1, "1")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(QuestionSetError, match="entries 0 and 1 share the id 1"):
        load_question_set(path)


def test_duplicate_ids_across_types_are_refused_too(tmp_path: Path, db: Path) -> None:
    path = tmp_path / "q.jsonl"
    rows = [{"id": qid, "db_path": db.name, "question": "q?", "gold_sql": "SELECT 1"} for qid in (1, "1")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(QuestionSetError, match="share the id"):
        load_question_set(path)


def test_duplicate_prediction_ids_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "pred.jsonl"
    path.write_text('{"id": 1, "sql": "SELECT 1"}\n{"id": "1", "sql": "SELECT 2"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: the id 1 .*line 1"):
        read_predictions(path)


@pytest.mark.parametrize("sql", [["SELECT 1"], {"a": 1}, 3])
def test_a_prediction_whose_sql_is_not_text_is_refused(tmp_path: Path, sql: object) -> None:
    path = tmp_path / "pred.jsonl"
    path.write_text(json.dumps({"id": 1, "sql": sql}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1: sql must be text or null"):
        read_predictions(path)


def test_scoring_without_predictions_runs_no_gold_query(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    original = Scorer.execute

    def counting(self: Scorer, db_path: Path, sql: str) -> Execution:
        ran.append(sql)
        return original(self, db_path, sql)

    monkeypatch.setattr(Scorer, "execute", counting)
    questions = [EvalQuestion(i, "shop", db, "q?", f"SELECT {i}") for i in range(1000)]
    summary = score_questions(questions, {"5": "SELECT 5"}, Scorer())
    assert ran == ["SELECT 5", "SELECT 5"]  # gold and prediction of the one question answered
    assert (summary["total"], summary["correct"], summary["failed_to_execute"]) == (1000, 1, 0)
    assert summary["no_prediction"] == 999
    assert summary["questions"][0]["pred_error"] == "no prediction"
