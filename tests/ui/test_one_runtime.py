"""The window, ``ask`` and ``eval run`` answer the same question the same way (``core.runtime``).

One scripted server, one settings file: the same question goes through the window's agent thread
(the runtime ``core.runtime.resolve`` makes of the settings, kept by the window's ``AgentRunner``:
its engine and tool-database opener; no window shown), through ``ask --json`` and through ``eval
run``, and what reached the model — every prompt, byte for byte, every sampling parameter — is
compared, together with the query time limit the tools ran under (it is in a tool result the model
reads) and the answer's row cap.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from keyring.backends import fail

from sqale_desktop.cli import main
from sqale_desktop.core import runtime as runtime_mod
from sqale_desktop.core import secrets
from sqale_desktop.core import settings as settings_mod
from sqale_desktop.core.agent.events import Episode, EpisodeEnded
from sqale_desktop.core.eval.records import read_episodes
from sqale_desktop.core.eval.replay import submit_completion
from sqale_desktop.core.history import History
from sqale_desktop.core.runtime import RECORDED_ENGINE, Built, ModelChoice, resolve
from sqale_desktop.ui.agent_runner import EpisodeDone, EventItem
from sqale_desktop.ui.main_window import MainWindow
from tests.completion_server import KEY, Script

QUESTION = "How many genres are there?"
GOLD = "SELECT GenreId FROM Genre"
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
SCRIPT = [
    ['Tables first.\n</think>\n\n{"tool": "list_tables"}'],
    # runs until the settings' query time limit stops it; the message names the limit
    ["Count everything.\n</think>\n\n", json.dumps({"tool": "run_query", "args": {"sql": ENDLESS}})],
    ["Count them.\n</think>\n\n", json.dumps({"tool": "submit_sql", "args": {"sql": GOLD}})],
]
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "max_tokens", "seed", "repeat_penalty")
TIME_LIMIT_S = 0.5


@pytest.fixture
def memory_key() -> Iterator[None]:
    secrets.use_backend(fail.Keyring())  # no keyring: the key lives in memory for the session
    secrets.set_secret(secrets.SERVER_API_KEY, KEY)
    yield
    secrets.use_backend(None)


def window_episode(qtbot: Any, settings: settings_mod.Settings, db: Path) -> Episode:
    """One question through the window's own agent thread and tool-database opener."""
    window = MainWindow(settings, resolve=resolve)  # as the app builds it
    qtbot.addWidget(window)
    runner = window.runner
    items: list[Any] = []
    runner.deliver_to(items.extend)  # the items come here instead of the window's chat
    try:
        runner.ask(QUESTION, db)
        qtbot.waitUntil(lambda: any(isinstance(i, EpisodeDone) for i in items), timeout=30_000)
    finally:
        assert window.shutdown()
    ended = [i.event for i in items if isinstance(i, EventItem) and isinstance(i.event, EpisodeEnded)]
    assert len(ended) == 1
    return ended[0].episode


def questions_file(tmp_path: Path, db: Path) -> Path:
    path = tmp_path / "questions.json"
    record = {"id": 1, "db_id": "chinook", "db_path": str(db), "question": QUESTION, "gold_sql": GOLD}
    path.write_text(json.dumps([record]), encoding="utf-8")
    return path


def test_window_ask_and_eval_send_the_model_the_same_bytes(
    qtbot: Any,
    chinook: Path,
    tmp_path: Path,
    server: tuple[str, Script],
    memory_key: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, script = server
    settings = dataclasses.replace(
        settings_mod.Settings(),
        engine="openai",
        server_url=url,
        temperature=0.3,
        top_p=0.8,
        top_k=7,
        min_p=0.05,
        n_ctx=8192,
        max_rows=3,
        query_time_limit_s=TIME_LIMIT_S,
    )
    settings_mod.save(settings)  # what the commands read: the app's own settings file

    def requests() -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
        taken = (list(script.requests), list(script.headers))
        script.requests[:], script.headers[:] = [], []
        script.completions = [list(c) for c in SCRIPT]
        return taken

    requests()
    window = window_episode(qtbot, settings, chinook)
    window_requests, window_headers = requests()

    assert main(["ask", "--db", str(chinook), "--question", QUESTION, "--json", "--no-log"]) == 0
    cli = json.loads(capsys.readouterr().out)
    cli_requests, cli_headers = requests()

    run_dir = tmp_path / "run"
    assert main(["eval", "run", str(questions_file(tmp_path, chinook)), "--out", str(run_dir)]) == 0
    capsys.readouterr()
    (record,) = read_episodes(run_dir)
    eval_requests, eval_headers = requests()

    assert len(window_requests) == len(cli_requests) == len(eval_requests) == 3
    for ours, ask, evaluated in zip(window_requests, cli_requests, eval_requests, strict=True):
        assert ours["prompt"].encode() == ask["prompt"].encode() == evaluated["prompt"].encode()
        sampling = [{k: request.get(k) for k in SAMPLING_KEYS} for request in (ours, ask, evaluated)]
        assert sampling[0] == sampling[1] == sampling[2]
    assert window_requests[0]["temperature"] == 0.3 and window_requests[0]["top_k"] == 7
    trace = record["trace"]
    assert window.prompt.encode() == cli["prompt"].encode() == trace["prompt"].encode()
    assert [h["Authorization"] for h in window_headers] == [h["Authorization"] for h in cli_headers]
    assert [h["Authorization"] for h in window_headers] == [h["Authorization"] for h in eval_headers]
    # The settings' query time limit stopped the endless query in all three (not the default 10 s).
    stopped = window.turns[1].calls[0].output
    assert f"ran past the {TIME_LIMIT_S:g} s time limit" in stopped
    assert stopped == cli["turns"][1]["calls"][0]["output"] == trace["turns"][1]["calls"][0]["output"]
    # The settings' row cap applies to every answer (25 genres, 3 kept).
    assert window.result is not None and window.result.row_count == cli["result"]["row_count"]
    assert len(window.result.rows) == len(cli["result"]["rows"]) == len(trace["result"]["rows"]) == 3
    assert record["correct"]  # the scorer compares the whole result, not the capped rows


def test_cli_flags_override_the_settings(
    chinook: Path,
    server: tuple[str, Script],
    memory_key: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, script = server
    settings_mod.save(dataclasses.replace(settings_mod.Settings(), engine="openai", server_url=url))
    script.completions = [list(c) for c in (SCRIPT[0], SCRIPT[2])]
    args = ["ask", "--db", str(chinook), "--question", QUESTION, "--json"]
    assert main([*args, "--temperature", "0.9", "--top-k", "3", "--max-rows", "2"]) == 0
    episode = json.loads(capsys.readouterr().out)
    assert (script.requests[0]["temperature"], script.requests[0]["top_k"]) == (0.9, 3)
    assert len(episode["result"]["rows"]) == 2


class ClosingEngine:
    """A replayed model that says whether it was closed (the llama engine frees its memory so)."""

    name = "closing"

    def __init__(self, completions: list[str]) -> None:
        from sqale_desktop.core.engines.replay import ReplayEngine

        self._replay = ReplayEngine(completions)
        self.closed = 0

    def describe(self) -> str:
        return "closing replay"

    def chat_template(self) -> str | None:
        return None

    def new_session(self, prompt: str) -> Any:
        return self._replay.new_session(prompt)

    def close(self) -> None:
        self.closed += 1


def test_eval_run_closes_the_llama_engine(
    tmp_path: Path, chinook: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The in-process engine is closed once the run is over (it was never closed before)."""
    questions = questions_file(tmp_path, chinook)
    engines: list[ClosingEngine] = []

    def build(settings: settings_mod.Settings, choice: ModelChoice) -> Built:
        def factory() -> Any:
            engines.append(ClosingEngine([submit_completion(GOLD)]))
            return engines[-1]

        return Built(factory, "fake llama", choice.model_path, choice.model_dir, concurrent=False)

    monkeypatch.setitem(runtime_mod.ENGINES, "llama", build)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setattr("sqale_desktop.core.eval.engines.gguf_facts", lambda path: {})
    argv = ["eval", "run", str(questions), "--model", str(model), "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    assert "1/1 correct" in capsys.readouterr().out
    assert [engine.closed for engine in engines] == [1]


def test_ask_records_its_episode_in_the_history_unless_no_log(
    chinook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ask`` joins the database's conversation, as a question asked in the window does."""
    replay = tmp_path / "script.json"
    replay.write_text(json.dumps([SCRIPT[0][0], "".join(SCRIPT[2])]), encoding="utf-8")
    args = ["ask", "--db", str(chinook), "--question", QUESTION, "--replay", str(replay), "--json"]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert main([*args, "--no-log"]) == 0
    capsys.readouterr()
    history = History()
    conversation = history.conversation_for(chinook)
    (entry,) = history.entries(conversation.id)  # the --no-log question is not there
    assert (entry.question, entry.state, entry.ended_by) == (QUESTION, "finished", "submit_sql")
    assert entry.sql == GOLD
    assert entry.episode is not None and entry.episode.prompt == printed["prompt"]


def test_the_recording_is_an_engine_of_the_runtime_table() -> None:
    runtime = resolve(settings_mod.Settings(), ModelChoice("recording", completions=("a", "b"), delay=0.0))
    assert runtime.kind == "recording" and runtime.factory is not None
    # The recording's engine names itself so the window knows a restored episode for a recording.
    assert runtime.factory().describe() == RECORDED_ENGINE
