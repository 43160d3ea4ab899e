"""``sqale-desktop ask`` with the replay and HTTP engines: output, JSON shape, exit status."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sqale_desktop.cli import main
from tests.completion_server import KEY, Script
from tests.helpers import smollm2_gguf

QUESTION = "How many genres are there?"
SCRIPT = [
    'Tables first.\n</think>\n\n{"tool": "list_tables"}',
    "Count them.\n</think>\n\n"
    '{"tool": "submit_sql", "args": {"sql": "SELECT COUNT(*) AS genres FROM Genre"}}',
]


@pytest.fixture
def replay_file(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT))
    return path


def test_json_output_has_the_documented_keys(
    chinook: Path, replay_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        ["ask", "--db", str(chinook), "--question", QUESTION, "--replay", str(replay_file), "--json"]
    )
    assert status == 0
    episode = json.loads(capsys.readouterr().out)
    assert {
        "question",
        "db",
        "sql",
        "ended_by",
        "result",
        "turns",
        "prompt",
        "prompt_source",
        "stats",
    } <= set(episode)
    assert (episode["question"], episode["ended_by"]) == (QUESTION, "submit_sql")
    assert episode["sql"] == "SELECT COUNT(*) AS genres FROM Genre"
    assert {k: episode["result"][k] for k in ("columns", "rows", "row_count", "truncated")} == {
        "columns": ["genres"],
        "rows": [[25]],
        "row_count": 1,
        "truncated": False,
    }
    assert [t["completion"] for t in episode["turns"]] == SCRIPT
    call = episode["turns"][0]["calls"][0]
    assert {k: call[k] for k in ("tool", "args", "ok")} == {"tool": "list_tables", "args": {}, "ok": True}
    assert call["output"].startswith("Album, Artist")
    assert set(episode["stats"]) >= {"prompt_tokens", "completion_tokens", "evaluated_tokens", "seconds"}
    assert episode["prompt_source"] == "builtin"
    assert episode["prompt"].startswith("<|im_start|>system\n")


def test_trace_streams_thinking_calls_and_results(
    chinook: Path, replay_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["ask", "--db", str(chinook), "--question", QUESTION, "--replay", str(replay_file), "--trace"])
        == 0
    )
    out = capsys.readouterr().out
    assert "engine: replay (2 scripted turns); prompt: builtin" in out
    assert "Tables first." in out
    assert "→ list_tables {}" in out
    assert "← list_tables ok" in out
    assert "[5 tool turns left before you must answer]" in out
    assert "sql: SELECT COUNT(*) AS genres FROM Genre" in out
    assert "genres\n25\n(1 row)" in out


def test_no_answer_exits_with_1(chinook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "empty.json"
    script.write_text(json.dumps(['</think>{"tool": "list_tables"}'] * 6 + ["I don't know.</think>"]))
    assert main(["ask", "--db", str(chinook), "--question", QUESTION, "--replay", str(script)]) == 1
    assert "ended by: no_answer" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--engine", "llama"], "needs --model"),
        (["--engine", "replay"], "needs --replay"),
        (["--engine", "openai"], "needs --base-url"),
        (["--model", "/nonexistent/model.gguf"], "no model file"),
    ],
)
def test_bad_combinations_exit_with_2(
    chinook: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ask", "--db", str(chinook), "--question", QUESTION, *extra]) == 2
    assert message in capsys.readouterr().err


def test_unreadable_database_or_script_exit_with_1(
    tmp_path: Path, replay_file: Path, chinook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["ask", "--db", str(tmp_path / "missing.db"), "--question", "q", "--replay", str(replay_file)])
        == 1
    )
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["ask", "--db", str(chinook), "--question", "q", "--replay", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "missing.db" in err and "not valid JSON" in err


def test_ask_over_http_with_the_key_from_the_environment(
    chinook: Path,
    server: tuple[str, Script],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, script = server
    script.completions = [[SCRIPT[0]], [SCRIPT[1]]]
    monkeypatch.setenv("SQALE_DESKTOP_API_KEY", KEY)
    assert main(["ask", "--db", str(chinook), "--question", QUESTION, "--base-url", url, "--json"]) == 0
    episode = json.loads(capsys.readouterr().out)
    assert episode["result"]["rows"] == [[25]]
    assert script.headers[0]["Authorization"] == f"Bearer {KEY}"
    assert KEY not in json.dumps(episode)


def test_the_installed_command_runs(chinook: Path, replay_file: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sqale_desktop", "ask", "--db", str(chinook), "--question", QUESTION,
         "--replay", str(replay_file), "--json"],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ended_by"] == "submit_sql"


def test_protocol_notes_go_to_stderr(
    chinook: Path, replay_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "sqale_agent.py").write_text("SYSTEM_PROMPT = 'half'\n")
    args = ["ask", "--db", str(chinook), "--question", QUESTION, "--replay", str(replay_file)]
    assert main([*args, "--model-dir", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    assert "no literal SYSTEM_PROMPT and USER_TEMPLATE" in captured.err
    assert json.loads(captured.out)["prompt_source"] == "builtin"


def test_prompt_from_a_sqale_agent_file(
    chinook: Path, replay_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = tmp_path / "sqale_agent.py"
    agent.write_text('SYSTEM_PROMPT = "Real system."\nUSER_TEMPLATE = "Q: {question}"\n')
    args = ["ask", "--db", str(chinook), "--question", QUESTION, "--replay", str(replay_file)]
    assert main([*args, "--model-dir", str(tmp_path), "--json"]) == 0
    episode = json.loads(capsys.readouterr().out)
    assert episode["prompt_source"] == f"sqale_agent.py:{agent}"
    assert episode["prompt"].startswith(
        f"<|im_start|>system\nReal system.<|im_end|>\n<|im_start|>user\nQ: {QUESTION}"
    )


def test_ctrl_c_stops_a_running_query_and_reports_cancelled(chinook: Path, tmp_path: Path) -> None:
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
    script = tmp_path / "endless.json"
    script.write_text(json.dumps(["</think>" + json.dumps({"tool": "run_query", "args": {"sql": endless}})]))
    process = subprocess.Popen(
        [sys.executable, "-m", "sqale_desktop", "ask", "--db", str(chinook), "--question", "q",
         "--replay", str(script), "--trace"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("→ run_query"):
            break
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, err
    assert "ended by: cancelled" in out
    assert "Traceback" not in err


def test_without_model_the_installed_model_is_used(chinook: Path) -> None:
    from sqale_desktop.cli import build_parser
    from sqale_desktop.commands.engine_flags import engine_flags
    from sqale_desktop.core.models.registry import Registry
    from sqale_desktop.core.runtime import choose
    from sqale_desktop.core.settings import Settings

    record = Registry().import_file(smollm2_gguf())
    args = build_parser().parse_args(["ask", "--db", str(chinook), "--question", QUESTION])
    runtime = choose(Settings(), engine_flags(args))  # what ask runs with for these flags
    assert runtime.factory is not None  # chosen, loaded when the factory runs
    assert runtime.model_path == Path(record.path)
    assert runtime.model_dir == Path(record.model_dir)  # its sqale_agent.py / generation_config.json


def test_json_episode_is_strict_json_with_the_export_cell_rules(
    chinook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 11: ``--json`` writes result cells by ``core.export_formats``' rules (BLOB ``X'..'``,
    infinities as text), so a strict parser reads it; the summary shows the display form."""
    script = tmp_path / "blob.json"
    sql = "SELECT x'00FF' AS b, 1e999 AS big, -1e999 AS small, NULL AS n"
    script.write_text(json.dumps([f'</think>\n\n{{"tool": "submit_sql", "args": {{"sql": "{sql}"}}}}']))
    argv = ["ask", "--db", str(chinook), "--question", QUESTION, "--replay", str(script)]
    assert main([*argv, "--json"]) == 0
    out = capsys.readouterr().out

    def refuse(name: str) -> object:
        raise ValueError(f"not JSON: {name}")

    episode = json.loads(out, parse_constant=refuse)
    assert episode["result"]["rows"] == [["X'00FF'", "inf", "-inf", None]]
    assert main(argv) == 0
    assert "<blob 2 bytes> | inf | -inf | NULL\n" in capsys.readouterr().out


def _ask_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object], str]:
    status = main([*args, "--json"])
    captured = capsys.readouterr()
    return status, json.loads(captured.out) if captured.out.strip() else {}, captured.err


def test_follow_up_last_continues_the_stored_thread(
    chinook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "long.json"
    script.write_text(json.dumps({"completions": SCRIPT, "n_ctx": 65536}))
    base = ["ask", "--db", str(chinook), "--replay", str(script)]
    status, first, err = _ask_json([*base, "--question", QUESTION], capsys)
    assert status == 0 and first["follow_up"] is None
    first_id = int(err.split("note: episode ")[1].split()[0])
    status, second, err = _ask_json([*base, "--question", "And per album?", "--follow-up", "last"], capsys)
    assert status == 0 and second["follow_up"] == "continued"
    assert str(second["prompt"]).startswith(str(first["prompt"]))
    assert second["earlier_questions"] == [QUESTION]
    second_id = int(err.split("note: episode ")[1].split()[0])
    status, third, _ = _ask_json([*base, "--question", "Only rock?", "--follow-up", str(second_id)], capsys)
    assert status == 0 and third["earlier_questions"] == [QUESTION, "And per album?"]
    from sqale_desktop.core.history import History

    assert History().entry(second_id).parent_entry_id == first_id


def test_a_thread_outgrowing_the_context_is_carried_and_said(
    chinook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "small.json"
    script.write_text(json.dumps({"completions": SCRIPT, "n_ctx": 8192}))
    base = ["ask", "--db", str(chinook), "--replay", str(script)]
    assert main([*base, "--question", QUESTION]) == 0
    capsys.readouterr()
    assert main([*base, "--question", "And per album?", "--follow-up", "last", "--trace"]) == 0
    out = capsys.readouterr().out
    assert "follow-up: carried (the thread" in out
    assert "follow-up: carried (the earlier questions and their SQL as text" in out


@pytest.mark.parametrize(
    ("follow_up", "message"),
    [
        ("last", "no finished answer about chinook.sqlite"),
        ("42", "there is no episode 42"),
        ("nope", "'last' or an episode id"),
    ],
)
def test_a_follow_up_on_nothing_is_a_clear_usage_error(
    chinook: Path, replay_file: Path, capsys: pytest.CaptureFixture[str], follow_up: str, message: str
) -> None:
    args = [
        "ask",
        "--db",
        str(chinook),
        "--question",
        "q",
        "--replay",
        str(replay_file),
        "--follow-up",
        follow_up,
    ]
    try:
        status = main(args)
    except SystemExit as exc:  # argparse refuses the value itself
        status = int(str(exc.code))
    assert status == 2
    assert message in capsys.readouterr().err


def test_a_follow_up_on_another_database_or_model_is_refused(
    chinook: Path, northwind: Path, replay_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ask", "--db", str(chinook), "--question", QUESTION, "--replay", str(replay_file)]) == 0
    entry = int(capsys.readouterr().err.split("note: episode ")[1].split()[0])
    other = ["ask", "--db", str(northwind), "--question", "q", "--replay", str(replay_file)]
    assert main([*other, "--follow-up", str(entry)]) == 2
    assert "was asked on" in capsys.readouterr().err
    server = ["ask", "--db", str(chinook), "--question", "q", "--base-url", "http://127.0.0.1:9"]
    assert main([*server, "--follow-up", str(entry)]) == 2
    assert f"episode {entry} was answered by replay" in capsys.readouterr().err
