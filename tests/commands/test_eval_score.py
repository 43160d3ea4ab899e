"""``sqale-desktop eval score``: the JSON it prints, and clear messages for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sqale_desktop import cli
from tests.helpers import shared_data


def _spider_questions() -> Path:
    return shared_data("text2sql/spider/questions.json")


def test_score_prints_the_documented_json_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    questions = _spider_questions()
    records = json.loads(questions.read_text(encoding="utf-8"))[:6]
    subset = tmp_path / "questions.json"
    for rec in records:
        rec["db_path"] = str(questions.parent / rec["db_path"])
    subset.write_text(json.dumps(records), encoding="utf-8")
    pred = tmp_path / "pred.jsonl"
    lines = [{"id": rec["id"], "sql": rec["gold_sql"]} for rec in records[:4]]
    lines[3]["sql"] = "SELECT x FROM nowhere"
    pred.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")

    assert cli.main(["eval", "score", str(subset), "--predictions", str(pred), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metric"] == "sqale"
    assert (out["total"], out["correct"], out["failed_to_execute"], out["no_prediction"]) == (6, 3, 1, 2)
    assert out["accuracy"] == pytest.approx(0.5)
    assert [q["id"] for q in out["questions"]] == [rec["id"] for rec in records]
    assert [q["correct"] for q in out["questions"]] == [True, True, True, False, False, False]
    assert "no such table" in out["questions"][3]["pred_error"]
    assert out["questions"][4]["pred_error"] == "no prediction"
    assert all(set(q) >= {"id", "correct", "pred_error", "f1"} for q in out["questions"])

    assert cli.main(["eval", "score", str(subset), "--predictions", str(pred), "--metric", "spider"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "spider: 3/6 correct (50.0 %), 1 predictions failed to execute, 2 questions have no prediction"
    )


def test_score_bad_input_is_a_message_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pred = tmp_path / "pred.jsonl"
    pred.write_text("{oops\n", encoding="utf-8")
    assert cli.main(["eval", "score", str(_spider_questions()), "--predictions", str(pred)]) == 1
    err = capsys.readouterr().err
    assert "line 1: not valid JSON" in err and "Traceback" not in err
    assert cli.main(["eval", "score", str(tmp_path / "none.json"), "--predictions", str(pred)]) == 1
    assert "no such file" in capsys.readouterr().err
