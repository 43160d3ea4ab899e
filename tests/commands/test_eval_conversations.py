"""``sqale-desktop eval run`` over a conversational set (SParC/CoSQL layout): the follow-up
conditions, resume, and the report's accuracy per turn position and tokens per follow-up."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from sqale_desktop import cli
from sqale_desktop.core.eval.conversations import load_conversations, summarise
from sqale_desktop.core.eval.records import read_episodes
from sqale_desktop.core.eval.replay import submit_completion
from tests.helpers import SHARED_DATA, shared_data

SET = Path(__file__).resolve().parents[1] / "core" / "eval" / "data" / "followups.json"


def _set() -> list[str]:
    for name in ("chinook", "northwind", "sakila"):
        shared_data(f"sample/{name}.sqlite")  # fails under CI when the data is missing
    # a context where a continued thread fits one more question's budget (16,384 tokens would not)
    return [str(SET), "--databases", str(SHARED_DATA), "--n-ctx", "65536"]


def test_gold_replay_asks_every_turn_under_each_condition_then_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    base = ["eval", "run", *_set(), "--replay", "gold", "--follow-ups", "standalone,continued,carried"]
    assert cli.main([*base, "--limit", "1", "--out", str(run_dir)]) == 0
    captured = capsys.readouterr()
    assert "9 of 9 turns to run" in captured.err and "9/9 correct" in captured.out
    settings = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["settings"]
    assert (settings["format"], settings["follow_ups"]) == ("sparc", ["standalone", "continued", "carried"])
    assert (settings["interactions"], settings["question_count"]) == (1, 3)

    assert cli.main([*base, "--limit", "2", "--resume", str(run_dir)]) == 0
    captured = capsys.readouterr()
    assert "9 of 18 turns to run" in captured.err and "9/9 correct" in captured.out
    interactions, _ = load_conversations(SET, SHARED_DATA)
    first_two = [i.id for i in interactions[:2]]
    saved = read_episodes(run_dir)
    asked = {(r["condition"], r["interaction"], r["turn"], r["follow_up"]) for r in saved}
    assert asked == {
        (condition, interaction, turn, "standalone" if turn == 1 or condition == "standalone" else condition)
        for condition in ("standalone", "continued", "carried")
        for interaction in first_two
        for turn in (1, 2, 3)
    }
    assert all(r["correct"] for r in saved) and len(saved) == 18

    changed = ["eval", "run", *_set(), "--replay", "gold", "--follow-ups", "carried"]
    assert cli.main([*changed, "--resume", str(run_dir)]) == 2
    assert "the run used follow_ups ['standalone', 'continued', 'carried']" in capsys.readouterr().err


def test_the_report_gives_accuracy_per_turn_and_tokens_per_follow_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scripts right on the first and last turns and wrong on the second: the report's rows say
    so per position, and a continued follow-up evaluates fewer tokens than a standalone one."""
    interactions, _ = load_conversations(SET, SHARED_DATA)
    chosen = interactions[:2]
    scripts = {
        f"{i.id}/{position}": [submit_completion(turn.gold_sql if position != 2 else "SELECT 'wrong'")]
        for i in chosen
        for position, turn in enumerate(i.turns, start=1)
    }
    replay = tmp_path / "scripts.json"
    replay.write_text(json.dumps(scripts), encoding="utf-8")
    run_dir = tmp_path / "run"
    argv = ["eval", "run", *_set(), "--replay", str(replay), "--limit", "2", "--out", str(run_dir)]
    assert cli.main([*argv, "--follow-ups", "standalone,continued"]) == 0
    assert "8/12 correct" in capsys.readouterr().out

    figures = summarise(read_episodes(run_dir))
    for condition in ("standalone", "continued"):
        assert {p: f["accuracy"] for p, f in figures[condition]["by_position"].items()} == {
            "1": 1.0,
            "2": 0.0,
            "3": 1.0,
        }
    assert figures["continued"]["follow_up_forms"] == {"continued": 4}
    continued = figures["continued"]["evaluated_tokens_per_follow_up"]
    assert 0 < continued < figures["standalone"]["evaluated_tokens_per_follow_up"]

    assert cli.main(["eval", "report", str(run_dir)]) == 0
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "## Follow-ups: accuracy per turn position" in report
    header = (
        "| follow-ups | turns | turn 1 accuracy | turn 2 accuracy | turn 3 accuracy | "
        "evaluated tokens / follow-up | follow-ups asked |"
    )
    assert header in report
    assert (
        f"| continued | 6 | 100.0 % (n=2) | 0.0 % (n=2) | 100.0 % (n=2) | {continued:.0f} | continued 4 |"
        in report
    )
    assert "| standalone | 6 | 66.7 % (4/6) |" in report  # the per-condition table counts turns
    assert "Follow-ups: accuracy per turn position" in (run_dir / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--follow-ups", "threaded"], "unknown follow-up condition 'threaded'"),
        (["--condition", "gold"], "runs on the full schema"),
        (["--format", "spider"], "--follow-ups and --databases are for conversational sets"),
    ],
)
def test_conversational_bad_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert cli.main(["eval", "run", *_set(), "--replay", "gold", "--out", str(tmp_path / "r"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_follow_ups_on_a_set_of_single_questions_is_bad_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = str(shared_data("text2sql/spider/questions.json"))
    argv = ["eval", "run", questions, "--replay", "gold", "--follow-ups", "continued"]
    assert cli.main([*argv, "--out", str(tmp_path / "r")]) == 2
    assert "--follow-ups and --databases are for conversational sets" in capsys.readouterr().err


def test_eval_score_names_a_conversational_set_for_what_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    predictions = SET  # never read: the set is refused first
    assert cli.main(["eval", "score", str(SET), "--predictions", str(predictions)]) == 1
    assert "is a conversational set (SParC/CoSQL layout)" in capsys.readouterr().err


@pytest.mark.slow
def test_the_llama_engine_continues_the_thread_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the in-process engine a continued follow-up evaluates what it adds to the thread, not
    the thread again (the tiny random-weight model answers nothing right: only the forms and the
    tokens are asserted)."""
    from sqale_desktop.core.engines.synthetic_gguf import TINY_SHAPE, write_qwen35_gguf

    model = write_qwen35_gguf(tmp_path / "tiny-qwen35.gguf", TINY_SHAPE, seed=3)
    run_dir = tmp_path / "run"
    argv = ["eval", "run", *_set(), "--model", str(model), "--follow-ups", "continued", "--limit", "1"]
    assert cli.main([*argv, "--out", str(run_dir)]) == 0
    assert "3 of 3 turns to run" in capsys.readouterr().err
    turns = read_episodes(run_dir)
    assert [(r["turn"], r["follow_up"]) for r in turns] == [
        (1, "standalone"),
        (2, "continued"),
        (3, "continued"),
    ]
    assert all(r["ended_by"] != "error" and r["engine"].startswith("local ") for r in turns)
    for before, after in itertools.pairwise(turns):
        added = after["tokens"]["prompt"] - before["tokens"]["prompt"]
        # at most a few of the thread's tokens are evaluated again where the engine resumes it
        assert 0 <= after["tokens"]["evaluated"] - added < 64, (before["tokens"], after["tokens"])
