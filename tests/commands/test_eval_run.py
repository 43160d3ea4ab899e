"""``sqale-desktop eval run`` with the replay engine: run folder, resume, bad usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sqale_desktop import cli
from sqale_desktop.core.eval.records import read_episodes
from tests.helpers import shared_data


def test_run_gold_replay_then_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    questions = str(shared_data("text2sql/spider/questions.json"))
    run_dir = tmp_path / "run"
    base = ["eval", "run", questions, "--replay", "gold", "--condition", "distractors:2"]
    assert cli.main([*base, "--limit", "6", "--out", str(run_dir)]) == 0
    assert "6/6 correct" in capsys.readouterr().out
    settings = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert settings["settings"]["condition"] == "distractors:2"
    assert settings["engine"]["kind"] == "replay" and settings["protocol"]["prompt_source"] == "builtin"
    assert {"platform", "python", "cpus"} <= set(settings["machine"])

    assert cli.main([*base, "--limit", "9", "--resume", str(run_dir), "--concurrency", "2"]) == 0
    captured = capsys.readouterr()
    assert "3 of 9 questions to run" in captured.err and "3/3 correct" in captured.out
    assert sorted(r["id"] for r in read_episodes(run_dir)) == list(range(9))

    assert cli.main([*base, "--out", str(run_dir)]) == 2  # a run is there already
    assert "--resume" in capsys.readouterr().err
    changed = ["eval", "run", questions, "--replay", "gold", "--condition", "gold", "--resume", str(run_dir)]
    assert cli.main(changed) == 2
    assert "the run used condition 'distractors:2'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--condition", "most"], "unknown condition"),
        (["--engine", "replay"], "--replay FILE"),
        (["--engine", "openai"], "--base-url"),
        (["--replay", "gold", "--concurrency", "0"], "--concurrency"),
    ],
)
def test_run_bad_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    questions = str(shared_data("text2sql/spider/questions.json"))
    assert cli.main(["eval", "run", questions, "--out", str(tmp_path / "r"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_run_against_an_unreachable_server_reports_the_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.delenv("SQALE_DESKTOP_API_KEY", raising=False)
    questions = str(shared_data("text2sql/spider/questions.json"))
    argv = ["eval", "run", questions, "--base-url", f"http://127.0.0.1:{port}", "--limit", "2"]
    assert cli.main([*argv, "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "2 episodes ended in an error (first: " in err and "Connection refused" in err, err
    assert [r["ended_by"] for r in read_episodes(tmp_path / "run")] == ["error", "error"]


def test_run_stops_after_a_few_episodes_that_cannot_reach_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hundreds of questions against a server that is not running: a few error lines, then a stop
    with a message that says what to do, not an error episode per question."""
    import socket

    from sqale_desktop.core.eval.harness import UNREACHABLE_LIMIT

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.delenv("SQALE_DESKTOP_API_KEY", raising=False)
    questions = str(shared_data("text2sql/spider/questions.json"))
    run_dir = tmp_path / "run"
    argv = ["eval", "run", questions, "--base-url", f"http://127.0.0.1:{port}", "--limit", "200"]
    assert cli.main([*argv, "--concurrency", "4", "--out", str(run_dir)]) == 1
    err = capsys.readouterr().err
    assert f"stopped after {UNREACHABLE_LIMIT} episodes in a row could not reach the server" in err, err
    assert "Connection refused" in err and f"--resume {run_dir}" in err
    written = read_episodes(run_dir)
    assert len(written) == UNREACHABLE_LIMIT  # those still running when it stopped are not kept
    assert {r["ended_by"] for r in written} == {"error"}
