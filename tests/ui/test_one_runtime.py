"""The window and ``sqale-desktop ask`` answer the same question the same way (``core.runtime``).

One scripted server, one settings file: the same question goes through the window's agent thread
(``ui.app.resolve_engine`` -> ``AgentRunner``, no window shown) and through the CLI, and what
reached the model — every prompt, byte for byte, and every sampling parameter — is compared.
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
from sqale_desktop.core import secrets
from sqale_desktop.core import settings as settings_mod
from sqale_desktop.core.agent.events import Episode, EpisodeEnded
from sqale_desktop.core.runtime import open_tool_database
from sqale_desktop.ui.agent_runner import AgentRunner, EpisodeDone, EventItem
from tests.core.engines.test_openai_http import KEY, Script, server  # noqa: F401 (fixture)

QUESTION = "How many genres are there?"
SCRIPT = [
    ['Tables first.\n</think>\n\n{"tool": "list_tables"}'],
    ["Count them.\n</think>\n\n", '{"tool": "submit_sql", "args": {"sql": "SELECT GenreId FROM Genre"}}'],
]
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "max_tokens", "seed", "repeat_penalty")


@pytest.fixture
def memory_key() -> Iterator[None]:
    secrets.use_backend(fail.Keyring())  # no keyring: the key lives in memory for the session
    secrets.set_secret(secrets.SERVER_API_KEY, KEY)
    yield
    secrets.use_backend(None)


def window_episode(qtbot: Any, settings: settings_mod.Settings, db: Path) -> Episode:
    from sqale_desktop.ui.app import resolve_engine

    factory, _description, episode_fn = resolve_engine(settings)
    runner = AgentRunner(factory, episode_fn, lambda p: open_tool_database(p, settings.query_time_limit_s))
    try:
        runner.ask(QUESTION, db)
        items: list[Any] = []
        qtbot.waitUntil(
            lambda: items.extend(runner.drain()) or any(isinstance(i, EpisodeDone) for i in items),
            timeout=20_000,
        )
    finally:
        assert runner.shutdown()
    ended = [i.event for i in items if isinstance(i, EventItem) and isinstance(i.event, EpisodeEnded)]
    assert len(ended) == 1
    return ended[0].episode


def test_window_and_cli_send_the_model_the_same_bytes(
    qtbot: Any,
    chinook: Path,
    server: tuple[str, Script],  # noqa: F811
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
    )
    settings_mod.save(settings)  # what the CLI reads: the app's own settings file

    script.completions = [list(c) for c in SCRIPT]
    window = window_episode(qtbot, settings, chinook)
    window_requests, script.requests[:] = list(script.requests), []
    window_headers, script.headers[:] = list(script.headers), []

    script.completions = [list(c) for c in SCRIPT]
    assert main(["ask", "--db", str(chinook), "--question", QUESTION, "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)

    assert len(window_requests) == len(script.requests) == 2
    for ours, theirs in zip(window_requests, script.requests, strict=True):
        assert ours["prompt"].encode() == theirs["prompt"].encode()
        assert {k: ours.get(k) for k in SAMPLING_KEYS} == {k: theirs.get(k) for k in SAMPLING_KEYS}
    assert window_requests[0]["temperature"] == 0.3 and window_requests[0]["top_k"] == 7
    assert window.prompt.encode() == cli["prompt"].encode()
    assert [h["Authorization"] for h in window_headers] == [h["Authorization"] for h in script.headers]
    # The settings' row cap applies to both answers (25 genres, 3 kept).
    assert window.result is not None and window.result.row_count == cli["result"]["row_count"]
    assert len(window.result.rows) == len(cli["result"]["rows"]) == 3


def test_cli_flags_override_the_settings(
    chinook: Path,
    server: tuple[str, Script],  # noqa: F811
    memory_key: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, script = server
    settings_mod.save(dataclasses.replace(settings_mod.Settings(), engine="openai", server_url=url))
    script.completions = [list(c) for c in SCRIPT]
    args = ["ask", "--db", str(chinook), "--question", QUESTION, "--json"]
    assert main([*args, "--temperature", "0.9", "--top-k", "3", "--max-rows", "2"]) == 0
    episode = json.loads(capsys.readouterr().out)
    assert (script.requests[0]["temperature"], script.requests[0]["top_k"]) == (0.9, 3)
    assert len(episode["result"]["rows"]) == 2
