"""The scorer runs both queries read-only with a time limit; failures are verdicts, never crashes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sqale_desktop.core.eval.questions import EvalQuestion
from sqale_desktop.core.eval.scorer import Scorer, read_predictions, score_questions


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, price REAL);
        INSERT INTO item VALUES (1, 'apple', 1.0), (2, 'pear', 2.5), (3, 'fig', 2.5);
        CREATE TABLE raw (b BLOB);
        """
    )
    conn.execute("INSERT INTO raw VALUES (CAST(? AS TEXT))", (b"ab\xffc",))
    conn.commit()
    conn.close()
    return path


def test_correct_wrong_and_f1(db: Path) -> None:
    scorer = Scorer("sqale")
    right = scorer.score(db, "SELECT name FROM item", "SELECT name FROM item ORDER BY name DESC")
    assert (right.correct, right.f1, right.pred_error) == (True, 1.0, None)
    wrong = scorer.score(db, "SELECT name FROM item", "SELECT name FROM item WHERE id < 3")
    assert not wrong.correct and wrong.pred_error is None
    assert wrong.f1 == pytest.approx(2 * 1.0 * (2 / 3) / (1 + 2 / 3))


def test_a_prediction_that_writes_is_refused_and_the_file_is_untouched(db: Path) -> None:
    before = db.read_bytes()
    score = Scorer().score(db, "SELECT 1", "DELETE FROM item")
    assert not score.correct and score.f1 is None
    assert score.pred_error is not None and "read-only" in score.pred_error
    assert db.read_bytes() == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["shop.sqlite"]


def test_a_prediction_that_hangs_times_out(db: Path) -> None:
    endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"
    score = Scorer(time_limit_s=0.2).score(db, "SELECT 1", endless)
    assert not score.correct
    assert score.pred_error is not None and "time limit" in score.pred_error


def test_a_huge_result_is_stopped_at_max_rows(db: Path) -> None:
    huge = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT 5000) SELECT x FROM n"
    score = Scorer(max_rows=1000).score(db, "SELECT 1", huge)
    assert score.pred_error == "the result has more than 1000 rows"


def test_broken_predictions_and_gold_are_reported(db: Path) -> None:
    scorer = Scorer()
    assert scorer.score(db, "SELECT 1", "SELEC nonsense").pred_error is not None
    assert scorer.score(db, "SELECT 1", None).pred_error == "no prediction"
    assert scorer.score(db, "SELECT 1", "  ").pred_error == "no prediction"
    gold_broken = scorer.score(db, "SELECT nope FROM item", "SELECT 1")
    assert not gold_broken.correct and gold_broken.pred_error is None
    assert gold_broken.gold_error is not None and "nope" in gold_broken.gold_error
    missing = scorer.score(db.parent / "absent.sqlite", "SELECT 1", "SELECT 1")
    assert missing.gold_error is not None and "no such file" in missing.gold_error


def test_spider_runs_queries_without_distinct(db: Path) -> None:
    # DISTINCT removed from both: the prediction's duplicates meet the gold's duplicates
    assert Scorer("spider").score(db, "SELECT DISTINCT price FROM item", "SELECT price FROM item").correct
    assert not Scorer("sqale").score(db, "SELECT DISTINCT price FROM item", "SELECT price FROM item").correct
    assert Scorer("bird").score(db, "SELECT DISTINCT price FROM item", "SELECT price FROM item").correct


def test_spider_decodes_text_ignoring_bad_bytes(db: Path) -> None:
    assert Scorer("spider").execute(db, "SELECT b FROM raw").rows == [("abc",)]
    assert Scorer("sqale").execute(db, "SELECT b FROM raw").rows == [("ab\ufffdc",)]
    assert Scorer("spider").score(db, "SELECT b FROM raw", "SELECT 'abc'").correct


def test_score_questions_shape_and_missing_predictions(db: Path, tmp_path: Path) -> None:
    questions = [
        EvalQuestion(0, "shop", db, "How many items?", "SELECT count(*) FROM item"),
        EvalQuestion(1, "shop", db, "Names?", "SELECT name FROM item"),
        EvalQuestion(2, "shop", db, "Prices?", "SELECT price FROM item"),
    ]
    pred = tmp_path / "pred.jsonl"
    pred.write_text(
        '{"id": 0, "sql": "SELECT 3"}\n\n{"id": "1", "sql": "SELECT id FROM item"}\n', encoding="utf-8"
    )
    summary = score_questions(questions, read_predictions(pred), Scorer())
    assert set(summary) == {
        "metric",
        "total",
        "correct",
        "accuracy",
        "failed_to_execute",
        "no_prediction",
        "gold_failed",
        "questions",
    }
    assert (summary["total"], summary["correct"], summary["failed_to_execute"]) == (3, 1, 0)
    assert summary["no_prediction"] == 1
    assert summary["accuracy"] == pytest.approx(1 / 3)
    assert [q["id"] for q in summary["questions"]] == [0, 1, 2]
    assert summary["questions"][2]["pred_error"] == "no prediction"
    assert set(summary["questions"][0]) >= {"id", "correct", "pred_error", "f1"}


@pytest.mark.parametrize("text", ["not json\n", '{"sql": "SELECT 1"}\n', "[1, 2]\n"])
def test_bad_prediction_files_raise_value_error(tmp_path: Path, text: str) -> None:
    pred = tmp_path / "pred.jsonl"
    pred.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="line 1"):
        read_predictions(pred)
