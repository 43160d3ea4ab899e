"""The OpenAI-compatible engine against a small streaming server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core.agent.events import EpisodeEnded
from sqale_desktop.core.agent.loop import run_episode
from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.engines.base import EngineError, SamplingParams
from sqale_desktop.core.engines.openai_http import OpenAIEngine
from sqale_desktop.core.tools import ToolBox
from tests.completion_server import KEY, Script

SAMPLING = SamplingParams(temperature=0.6, top_p=0.95, top_k=20, seed=7)


def test_streams_deltas_and_sends_every_parameter(server: tuple[str, Script]) -> None:
    url, script = server
    script.completions = [["<think>\n", "plan</think>", '{"tool": "list_tables"}'], ["second"]]
    engine = OpenAIEngine(url, api_key=KEY)
    session = engine.new_session("PROMPT")
    cancel = threading.Event()
    assert list(session.generate(2048, SAMPLING, cancel)) == script.completions[0]
    session.end_turn()
    session.append("\nRESULTS\n")
    assert "".join(session.generate(100, SAMPLING, cancel)) == "second"
    first, second = script.requests
    assert first["prompt"] == "PROMPT"
    assert second["prompt"] == 'PROMPT<think>\nplan</think>{"tool": "list_tables"}<|im_end|>\nRESULTS\n'
    assert session.prompt_text == second["prompt"] + "second"
    assert first["stream"] is True
    assert first["max_tokens"] == 2048
    assert (first["temperature"], first["top_p"], first["top_k"], first["min_p"]) == (0.6, 0.95, 20, 0.0)
    assert first["repetition_penalty"] == first["repeat_penalty"] == 1.0
    assert first["seed"] == 7
    assert first["stop"] == ["<|im_end|>", "<|endoftext|>"]
    assert first["model"] == "trl-lab/qwen3.5-2b-grpo-sqale"  # discovered from /v1/models
    assert script.headers[0]["Authorization"] == f"Bearer {KEY}"
    assert script.paths == ["/v1/models", "/v1/completions", "/v1/completions"]


def test_usage_gives_the_token_counts(server: tuple[str, Script]) -> None:
    url, script = server
    script.completions = [["a ", "b ", "c"]]
    session = OpenAIEngine(url, model="m").new_session("one two three four")
    list(session.generate(10, SAMPLING, threading.Event()))
    assert session.stats.completion_tokens == 3
    assert session.stats.prompt_tokens == 4 + 3
    assert session.stats.evaluated_tokens == 4 - 2 + 3  # cached prompt tokens were not evaluated
    assert "Authorization" not in script.headers[0]


def test_without_usage_counts_are_estimated(server: tuple[str, Script]) -> None:
    url, script = server
    script.completions = [["x", "y"]]
    script.usage = False
    session = OpenAIEngine(url, model="m").new_session("a b ")
    list(session.generate(10, SAMPLING, threading.Event()))
    assert session.stats.completion_tokens == 2
    assert session.stats.prompt_tokens == 3  # "a", "b", "xy"


def test_finish_reason_length(server: tuple[str, Script]) -> None:
    url, script = server
    script.completions = [["cut"]]
    script.finish_reason = "length"
    session = OpenAIEngine(url, model="m").new_session("p")
    list(session.generate(1, SAMPLING, threading.Event()))
    assert session.last_finish_reason == "length"


def test_base_url_may_end_in_v1(server: tuple[str, Script]) -> None:
    url, script = server
    script.completions = [["ok"]]
    session = OpenAIEngine(url + "/v1/", model="m").new_session("p")
    assert list(session.generate(5, SAMPLING, threading.Event())) == ["ok"]
    assert script.paths == ["/v1/completions"]


def test_http_errors_never_show_the_key(server: tuple[str, Script]) -> None:
    url, script = server
    script.status = 401
    script.error_body = json.dumps({"error": {"message": f"invalid key {KEY}"}})
    session = OpenAIEngine(url, api_key=KEY, model="m").new_session("p")
    with pytest.raises(EngineError) as info:
        list(session.generate(5, SAMPLING, threading.Event()))
    message = str(info.value)
    assert "401" in message and "check the API key" in message
    assert KEY not in message and "***" in message


def test_unreachable_server_is_an_engine_error() -> None:
    with socket_closed_port() as port:
        session = OpenAIEngine(f"http://127.0.0.1:{port}", api_key=KEY, model="m").new_session("p")
        with pytest.raises(EngineError, match="cannot reach the server") as info:
            list(session.generate(5, SAMPLING, threading.Event()))
    assert KEY not in str(info.value)


def test_bad_addresses_are_refused() -> None:
    with pytest.raises(EngineError, match="not a server address"):
        OpenAIEngine("localhost:8000")


def test_cancel_ends_a_stalled_stream(server: tuple[str, Script]) -> None:
    url, script = server
    script.completions = [["first", "never sent"]]
    script.stall = threading.Event()
    session = OpenAIEngine(url, model="m").new_session("p")
    cancel = threading.Event()
    received: list[str] = []
    for chunk in session.generate(100, SAMPLING, cancel):
        received.append(chunk)
        threading.Timer(0.05, cancel.set).start()
    assert received == ["first"]
    assert session.last_finish_reason == "cancelled"
    assert not script.stall.is_set()  # the server was still stalling: the client hung up on it


def test_a_whole_episode_over_http(server: tuple[str, Script], chinook: Path) -> None:
    url, script = server
    script.completions = [
        ["Tables first.\n</think>\n\n", '{"tool": "list_tables"}'],
        ["Count.\n</think>\n\n", '{"tool": "submit_sql", "args": {"sql": "SELECT COUNT(*) FROM Genre"}}'],
    ]
    db = open_readonly(chinook)
    try:
        events = list(run_episode("How many genres?", db, ToolBox(db), OpenAIEngine(url, model="m")))
    finally:
        db.close()
    last = events[-1]
    assert isinstance(last, EpisodeEnded)
    episode = last.episode
    assert (episode.ended_by, episode.sql) == ("submit_sql", "SELECT COUNT(*) FROM Genre")
    assert episode.result is not None and episode.result.rows == [[25]]
    assert script.requests[1]["prompt"] == episode.prompt[: len(script.requests[1]["prompt"])]
    assert "Tool result: Album, Artist" in script.requests[1]["prompt"]
    assert script.requests[1]["prompt"].endswith("<|im_start|>assistant\n<think>\n")


class socket_closed_port:
    """A local port with nothing listening on it."""

    def __enter__(self) -> int:
        import socket

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self._port: int = sock.getsockname()[1]
        sock.close()
        return self._port

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize(
    "raw",
    [
        {"choices": [{"text": 5}]},
        {"choices": ["text"]},
        {"choices": {"text": "x"}},
        {"choices": [{"text": ["a"]}]},
    ],
)
def test_a_malformed_chunk_ends_the_episode_with_an_error(
    server: tuple[str, Script], chinook: Path, raw: Any
) -> None:
    url, script = server
    script.raw_events = [{"choices": [{"text": "Fine so far "}]}, raw]
    with open_readonly(chinook) as db:
        events = list(run_episode("How many genres?", db, ToolBox(db), OpenAIEngine(url, model="m")))
    last = events[-1]
    assert isinstance(last, EpisodeEnded)
    assert last.episode.ended_by == "error"
    assert "malformed" in (last.episode.error or "")


def test_lone_surrogates_from_a_server_become_replacement_characters(
    server: tuple[str, Script], chinook: Path, tmp_path: Path
) -> None:
    from sqale_desktop.core.history import History

    url, script = server
    text = "Odd \ud800 text.\n</think>\n\n" + '{"tool": "submit_sql", "args": {"sql": "SELECT 1 -- \udfff"}}'
    script.raw_events = [{"choices": [{"text": text}]}]
    with open_readonly(chinook) as db:
        events = list(run_episode("Why \udcff?", db, ToolBox(db), OpenAIEngine(url, model="m")))
    last = events[-1]
    assert isinstance(last, EpisodeEnded)
    episode = last.episode
    for value in (episode.prompt, episode.sql or "", episode.turns[0].completion, episode.question):
        value.encode("utf-8")  # strict: no lone surrogate left anywhere
    assert "Odd \ufffd text." in episode.turns[0].completion
    history = History(tmp_path / "history.sqlite")
    conversation = history.conversation_for(chinook)
    entry = history.add_question(conversation.id, episode.question)
    history.finish_episode(entry, episode)
    saved = history.entry(entry)
    assert saved.episode is not None and saved.episode.sql == episode.sql
