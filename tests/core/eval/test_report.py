"""Reports and comparisons: Wilson intervals, McNemar's test, report files, flipped questions."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop import cli
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.engines.base import EngineError
from sqale_desktop.core.eval.conditions import Condition
from sqale_desktop.core.eval.harness import EvalRun, RunOptions
from sqale_desktop.core.eval.questions import EvalQuestion, load_question_set
from sqale_desktop.core.eval.replay import replay_engine_for, submit_completion
from sqale_desktop.core.eval.report import ReportError, compare_runs, summarise, write_report
from sqale_desktop.core.eval.stats import mcnemar, wilson
from sqale_desktop.core.runtime import episode_fn, open_tool_database
from sqale_desktop.core.settings import Settings
from tests.helpers import shared_data


def test_wilson_interval() -> None:
    assert wilson(0, 10) == pytest.approx((0.0, 0.27754), abs=1e-5)
    assert wilson(5, 10) == pytest.approx((0.23659, 0.76341), abs=1e-5)
    assert wilson(10, 10) == pytest.approx((0.72246, 1.0), abs=1e-5)
    assert wilson(0, 0) == (0.0, 1.0)


def test_mcnemar_exact_for_small_counts_and_chi_square_for_large() -> None:
    assert mcnemar(0, 0).p_value == 1.0
    assert mcnemar(1, 6).p_value == pytest.approx(2 * (1 + 7) / 128)
    assert mcnemar(0, 5).p_value == pytest.approx(2 / 32)
    assert mcnemar(3, 3).p_value == 1.0
    assert mcnemar(1, 6).method == "exact binomial"
    large = mcnemar(10, 30)
    assert large.method.startswith("chi-square")
    assert large.p_value == pytest.approx(0.0026636, rel=1e-3)  # chi2.sf(9.025, 1)


def _two_runs(tmp_path: Path) -> tuple[Path, Path, list[EvalQuestion]]:
    questions = load_question_set(shared_data("text2sql/spider/questions.json")).questions[:12]

    def script_a(q: EvalQuestion) -> list[str]:  # right on the first 8
        return [submit_completion(q.gold_sql if int(q.id) < 8 else "SELECT 'wrong'")]

    def script_b(q: EvalQuestion) -> list[str]:  # right on 2..11
        return [submit_completion(q.gold_sql if int(q.id) >= 2 else "SELECT 'wrong'")]

    dirs = []
    for name, script in (("a", script_a), ("b", script_b)):
        run = EvalRun(
            tmp_path / name,
            replay_engine_for(script),
            episode_fn(Settings(), AgentProtocol()),
            lambda path: open_tool_database(path, Settings().query_time_limit_s),
            RunOptions(condition=Condition("gold")),
            cache=tmp_path / "cache",
        )
        list(run.run(questions))
        (tmp_path / name / "run.json").write_text(
            json.dumps({"settings": {"condition": "gold"}}), encoding="utf-8"
        )
        dirs.append(tmp_path / name)
    return dirs[0], dirs[1], questions


def test_report_files_are_written_and_self_contained(tmp_path: Path) -> None:
    run_a, _, _ = _two_runs(tmp_path)
    summary = summarise(run_a)
    (gold,) = summary.conditions
    assert (gold.condition, gold.episodes, gold.correct) == ("gold", 12, 8)
    assert gold.ci == pytest.approx(wilson(8, 12))
    md, page = write_report(run_a)
    text = md.read_text(encoding="utf-8")
    assert "| gold | 12 | 66.7 % (8/12) |" in text and "submit_sql 12" in text
    assert (run_a / "report_files" / "accuracy.png").read_bytes().startswith(b"\x89PNG")
    markup = page.read_text(encoding="utf-8")
    images = re.findall(r"src='([^']*)'", markup)
    assert len(images) >= 6 and all(src.startswith("data:image/png;base64,") for src in images)
    assert "http://" not in markup and "https://" not in markup  # nothing to fetch


def test_compare_lists_flipped_questions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_a, run_b, _ = _two_runs(tmp_path)
    (comparison,) = compare_runs(run_a, run_b)
    assert comparison.paired == 12
    assert (comparison.only_a, comparison.only_b) == ([0, 1], [8, 9, 10, 11])
    assert comparison.test.p_value == pytest.approx(mcnemar(2, 4).p_value)
    assert cli.main(["eval", "compare", str(run_a), str(run_b)]) == 0
    out = capsys.readouterr().out
    assert "B - A +16.7 points" in out and "only A right (2): 0, 1" in out
    assert cli.main(["eval", "compare", str(run_a), str(run_b), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["conditions"][0]["only_b_correct"] == [8, 9, 10, 11]
    assert cli.main(["eval", "report", str(run_b)]) == 0
    assert (run_b / "report.html").is_file()


def test_not_a_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ReportError, match="not a run folder"):
        summarise(tmp_path)
    assert cli.main(["eval", "report", str(tmp_path)]) == 1
    assert "not a run folder" in capsys.readouterr().err


def _one_run(tmp_path: Path, questions: list[EvalQuestion], engine_for: Any) -> Path:
    run_dir = tmp_path / "run"
    run = EvalRun(
        run_dir,
        engine_for,
        episode_fn(Settings(), AgentProtocol()),
        lambda path: open_tool_database(path, Settings().query_time_limit_s),
        RunOptions(condition=Condition("gold")),
        cache=tmp_path / "cache",
    )
    list(run.run(questions))
    (run_dir / "run.json").write_text(json.dumps({"settings": {"condition": "gold"}}), encoding="utf-8")
    return run_dir


def _broken_engine(_question: EvalQuestion, _index: int) -> Any:
    raise EngineError("the model file is unreadable")


@pytest.mark.parametrize(
    ("case", "count", "expected_row", "expected_mix"),
    [
        ("all right", 12, "| gold | 12 | 100.0 % (12/12) | 75.8–100.0 % |", "submit_sql 12"),
        ("all wrong", 12, "| gold | 12 | 0.0 % (0/12) | 0.0–24.2 % |", "submit_sql 12"),
        ("one question", 1, "| gold | 1 | 100.0 % (1/1) | 20.7–100.0 % |", "submit_sql 1"),
        ("every episode errored", 3, "| gold | 3 | 0.0 % (0/3) | 0.0–56.1 % |", "error 3"),
    ],
)
def test_report_at_the_edges(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    count: int,
    expected_row: str,
    expected_mix: str,
) -> None:
    """0 % and 100 % (the Wilson bound equals the accuracy up to rounding: no negative error bar),
    one question, and a run in which no episode could run: `eval report` writes every file."""
    questions = load_question_set(shared_data("text2sql/spider/questions.json")).questions[:count]
    if case == "every episode errored":
        engine_for: Any = _broken_engine
    else:
        right = case != "all wrong"
        engine_for = replay_engine_for(
            lambda q: [submit_completion(q.gold_sql if right else "SELECT 'wrong'")]
        )
    run_dir = _one_run(tmp_path, questions, engine_for)
    assert cli.main(["eval", "report", str(run_dir)]) == 0, capsys.readouterr().err
    text = (run_dir / "report.md").read_text(encoding="utf-8")
    assert expected_row in text and f"- gold: {expected_mix}" in text
    images = sorted(p.name for p in (run_dir / "report_files").iterdir())
    assert "accuracy.png" in images and len(images) == 7
    assert all((run_dir / "report_files" / name).read_bytes().startswith(b"\x89PNG") for name in images)
    assert (run_dir / "report.html").read_text(encoding="utf-8").count("data:image/png;base64,") == 7
