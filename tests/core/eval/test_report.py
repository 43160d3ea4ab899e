"""Reports and comparisons: Wilson intervals, McNemar's test, report files, flipped questions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sqale_desktop import cli
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.eval.conditions import Condition
from sqale_desktop.core.eval.harness import EvalRun, RunOptions
from sqale_desktop.core.eval.questions import EvalQuestion, load_question_set
from sqale_desktop.core.eval.replay import replay_engine_for, submit_completion
from sqale_desktop.core.eval.report import ReportError, compare_runs, summarise, write_report
from sqale_desktop.core.eval.stats import mcnemar, wilson
from sqale_desktop.core.runtime import episode_fn, open_tool_database
from sqale_desktop.core.settings import Settings
from tests.conftest import shared_data


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
