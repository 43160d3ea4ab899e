"""Once a model is registered, the app works with the network gone.

Every attempt to open an internet socket (``socket.socket.connect``/``connect_ex`` on AF_INET or
AF_INET6, ``socket.create_connection``, DNS lookups through ``getaddrinfo``) raises and is
recorded.  Unix-domain sockets stay allowed: a desktop keyring talks to D-Bus over one, which is
not the network.  Under that block: start-up pieces (settings, keyring, registry, catalog, GPU
report), a full episode with the replay engine, and a full episode with the llama.cpp engine on a
registered local GGUF (SmolLM2) must all work, and no attempt may have been made.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core import secrets, settings
from sqale_desktop.core.agent.events import EpisodeEnded
from sqale_desktop.core.agent.loop import run_episode
from sqale_desktop.core.agent.protocol import AgentProtocol, load_protocol
from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.models import catalog
from sqale_desktop.core.models.registry import Registry
from sqale_desktop.core.runtime import gpu_offload
from sqale_desktop.core.tools import ToolBox
from tests.helpers import smollm2_gguf as smollm2

INET = (socket.AF_INET, socket.AF_INET6)


class NetworkBlocked(OSError):
    pass


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Make every internet connection attempt fail; yields the list of attempts."""
    attempts: list[str] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in INET:
            attempts.append(f"connect {address!r}")
            raise NetworkBlocked(f"network disabled in this test: connect {address!r}")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if self.family in INET:
            attempts.append(f"connect_ex {address!r}")
            raise NetworkBlocked(f"network disabled in this test: connect_ex {address!r}")
        return real_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        attempts.append(f"create_connection {address!r}")
        raise NetworkBlocked(f"network disabled in this test: create_connection {address!r}")

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(f"getaddrinfo {host!r}")
        raise socket.gaierror(f"network disabled in this test: getaddrinfo {host!r}")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # offline must not depend on that flag
    yield attempts


def test_the_block_really_blocks(no_network: list[str]) -> None:
    """The fixture itself must catch what a library would do (so the tests below can fail)."""
    import urllib.request

    with pytest.raises(OSError):
        urllib.request.urlopen("http://127.0.0.1:9/", timeout=1)
    with pytest.raises(OSError):
        socket.create_connection(("huggingface.co", 443), timeout=1)
    assert len(no_network) == 2


def test_startup_pieces_and_replay_episode_make_no_connection(
    no_network: list[str], chinook: Path, tmp_path: Path
) -> None:
    from keyring.backends import fail

    secrets.use_backend(fail.Keyring())
    try:
        loaded = settings.load()
        settings.save(loaded.settings)
        assert secrets.keyring_message() is not None
        record = Registry().import_file(smollm2(), source_checkpoint=catalog.default_entry().repo_id)
        assert Registry().verify(record.id).ok
        extras = tmp_path / "snapshot"
        extras.mkdir()
        (extras / "generation_config.json").write_text('{"temperature": 0.6, "top_p": 0.95, "top_k": 20}')
        record = Registry().add(
            dataclasses.replace(
                record, extras={"generation_config.json": str(extras / "generation_config.json")}
            )
        )
        protocol = load_protocol(Registry().get(record.id).model_dir)
        assert protocol.sampling.top_k == 20
        assert gpu_offload().message
        assert catalog.large_schema_hint(3) is None

        db = open_readonly(chinook)
        try:
            script = [
                '<think>\nLook.\n</think>\n\n{"tool": "list_tables"}',
                "<think>\nDone.\n</think>\n\n"
                '{"tool": "submit_sql", "args": {"sql": "SELECT COUNT(*) FROM Artist"}}',
            ]
            events = list(run_episode("How many artists?", db, ToolBox(db), ReplayEngine(script), protocol))
        finally:
            db.close()
    finally:
        secrets.use_backend(None)
    last = events[-1]
    assert isinstance(last, EpisodeEnded)
    assert last.episode.ended_by == "submit_sql"
    assert last.episode.result is not None and last.episode.result.rows == [[275]]
    assert no_network == []


@pytest.mark.slow
def test_llama_engine_episode_on_registered_gguf_makes_no_connection(
    no_network: list[str], chinook: Path
) -> None:
    from sqale_desktop.core.engines.llama.engine import LlamaEngine

    record = Registry().import_file(smollm2())
    model_id = Registry().get(record.id)
    engine = LlamaEngine(model_id.path, n_ctx=2048, n_gpu_layers=0, n_threads=2)
    # SmolLM2 does not know the tools: a short prompt and budget keep the episode to two small
    # turns (what is tested is that loading and answering stay off the network, not the answer)
    protocol = dataclasses.replace(
        AgentProtocol(),
        system_prompt="Answer with tool calls.",
        tool_turns=1,
        tool_turn_tokens=24,
        final_turn_tokens=24,
        episode_tokens=1500,
        context_tokens=2048,
        sampling=SamplingParams(seed=7),
    )
    db = open_readonly(chinook)
    try:
        engine.load()
        events = list(run_episode("How many artists?", db, ToolBox(db), engine, protocol))
    finally:
        db.close()
        engine.close()
    last = events[-1]
    assert isinstance(last, EpisodeEnded)
    assert last.episode.ended_by != "error", last.episode.error
    assert last.episode.stats is not None and last.episode.stats.completion_tokens > 0
    assert no_network == []


def test_cli_start_imports_no_network_library(isolated_home: Path) -> None:
    """``models list`` (the start-up path of the CLI) loads neither huggingface_hub nor an HTTP client."""
    code = (
        "import sys, json; from sqale_desktop.cli import main; rc = main(['models', 'list']); "
        "print(json.dumps([rc, sorted(m for m in ('huggingface_hub', 'httpx2', 'httpx', 'requests') "
        "if m in sys.modules)]))"
    )
    env = {**os.environ, "SQALE_DESKTOP_HOME": str(isolated_home)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    rc, network_modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert rc == 0 and network_modules == []
