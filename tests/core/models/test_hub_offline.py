"""Offline, a hub lookup fails at once with the offline message: no retries, no backoff sleeps."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core.models import hub
from sqale_desktop.core.models.errors import HubUnavailable


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def unreachable_hub(hf_env: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    from huggingface_hub import constants

    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setattr(constants, "ENDPOINT", url)
    hub.forget_reachability()
    return url


def test_an_unreachable_hub_is_reported_without_retrying(
    unreachable_hub: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.utils._http as hf_http

    slept: list[float] = []
    monkeypatch.setattr(hf_http.time, "sleep", lambda seconds: slept.append(seconds))
    with pytest.raises(HubUnavailable, match="offline") as raised:
        hub.search_gguf_repos("trl-lab/qwen3.5-2b-grpo-synsql")
    assert unreachable_hub in str(raised.value)
    with pytest.raises(HubUnavailable, match="offline"):
        hub.list_gguf_files("someone/model-GGUF")
    assert slept == []  # the library's backoff (1, 2, 4, 8, 8 s) never started


def test_the_probe_goes_to_the_proxy_when_one_is_set(unreachable_hub: str, monkeypatch: Any) -> None:
    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")
    assert hub.probe_target() == ("proxy.invalid", 3128)


def test_a_reachable_hub_is_probed_once_per_interval(fake_hub: Any, monkeypatch: Any) -> None:
    hub.forget_reachability()
    connects: list[object] = []
    real = socket.create_connection

    def counting(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("timeout") == hub.PROBE_TIMEOUT_S:  # the probe's, not the library's
            connects.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(hub.socket, "create_connection", counting)
    hub.search_gguf_repos("trl-lab/qwen3.5-2b-grpo-synsql")
    hub.search_gguf_repos("trl-lab/qwen3.5-2b-grpo-sqale")
    assert len(connects) == 1
