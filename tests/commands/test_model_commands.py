"""``sqale-desktop models ...`` end to end, in-process, against the fake hub."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from keyring.backends import fail

from sqale_desktop import cli
from sqale_desktop.core import secrets, settings
from sqale_desktop.core.models.registry import Registry
from tests.core.models.fakehub import FakeHub, FakeRepo
from tests.helpers import EMPTY_GGUF_HEADER as EMPTY_HEADER

REPO = "alice/qwen3.5-2b-grpo-bird-GGUF"
CKPT = "trl-lab/qwen3.5-2b-grpo-bird"
FILE = "bird-Q4_K_M.gguf"
DATA = b"GGUF" + bytes(range(256)) * 400


@pytest.fixture
def hub_repos(fake_hub: FakeHub) -> FakeHub:
    fake_hub.add(
        FakeRepo(
            REPO,
            {FILE: DATA, "bird-Q8_0.gguf": DATA * 2},
            lfs={FILE, "bird-Q8_0.gguf"},
            tags=["gguf"],
            base_model=CKPT,
        )
    )
    fake_hub.add(FakeRepo(CKPT, {"generation_config.json": b'{"temperature": 0.6, "top_k": 20}'}))
    return fake_hub


@pytest.fixture
def memory_keyring() -> Iterator[None]:
    secrets.use_backend(fail.Keyring())
    yield
    secrets.use_backend(None)


def test_search_download_list_verify_remove(
    hub_repos: FakeHub, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert cli.main(["models", "search", "M_BIRD"]) == 0
    out = capsys.readouterr().out
    assert (
        REPO in out
        and "bird-Q4_K_M.gguf" in out
        and "<- suggested" in out.split("bird-Q4_K_M.gguf")[1].split("\n")[0]
    )

    assert cli.main(["models", "download", REPO, FILE, "--select"]) == 0
    captured = capsys.readouterr()
    model_id, path = captured.out.strip().split("\t")
    assert Path(path).read_bytes() == DATA
    assert "MiB/s" in captured.err
    assert settings.load().settings.model_id == model_id
    record = Registry().get(model_id)
    assert record.source_checkpoint == CKPT
    assert set(record.extras) == {"generation_config.json"}  # sqale_agent.py does not exist there

    assert cli.main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert f"* {model_id}" in out and "M_SQaLe" in out and "GPU offload:" in out

    assert cli.main(["models", "verify", model_id]) == 0
    assert "OK" in capsys.readouterr().out

    assert cli.main(["models", "remove", model_id]) == 0
    assert settings.load().settings.model_id == ""
    assert cli.main(["models", "verify", model_id]) == 1
    assert "No registered model" in capsys.readouterr().err


def test_import_and_bad_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "mine.gguf"
    good.write_bytes(EMPTY_HEADER + b"\0" * 44)
    assert cli.main(["models", "import", str(good), "--checkpoint", "M_SQaLe"]) == 0
    model_id = capsys.readouterr().out.split("\t")[0]
    assert Registry().get(model_id).source_checkpoint == "trl-lab/qwen3.5-2b-grpo-sqale"
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    assert cli.main(["models", "import", str(bad)]) == 1
    assert "not a GGUF" in capsys.readouterr().err


def test_gated_download_without_token_asks_for_one(
    hub_repos: FakeHub, capsys: pytest.CaptureFixture[str]
) -> None:
    hub_repos.repos[REPO].gated_token = "hf_abc"
    assert cli.main(["models", "download", REPO, FILE]) == 1
    err = capsys.readouterr().err
    assert "token" in err and "Settings" in err
    assert Registry().list() == []


# A fake token, assembled so that no committed line looks like a real Hugging Face token.
TOKEN = "hf_" + "SuperSecretToken" + "Value0123456789"


def test_token_never_lands_in_files_logs_or_messages(
    hub_repos: FakeHub,
    memory_keyring: None,
    capsys: pytest.CaptureFixture[str],
    isolated_home: Path,
    hf_env: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A run that used a token (gated download with it, one with a wrong token, settings saved,
    DEBUG logging of every library on): grep everything written for the token."""
    import logging

    from sqale_desktop.core import paths

    hub_repos.repos[REPO].gated_token = TOKEN
    log_file = paths.log_dir() / "sqale-desktop.log"
    handler = logging.FileHandler(log_file, encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    caplog.set_level(logging.DEBUG)
    try:
        assert secrets.set_secret(secrets.HF_TOKEN, TOKEN) is False  # memory only: no keyring here
        assert cli.main(["models", "download", REPO, FILE, "--select"]) == 0
        secrets.set_secret(secrets.HF_TOKEN, TOKEN[:-1] + "X")  # a wrong token: error path
        assert cli.main(["models", "download", REPO, "bird-Q8_0.gguf"]) == 1
        assert cli.main(["models", "list"]) == 0
        s = settings.load().settings
        s.add_recent_database("/tmp/x.sqlite")
        settings.save(s)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
    # the token really was sent (so this test can fail)
    sent = [r for r in hub_repos.requests("hub") if r.headers.get("authorization") == f"Bearer {TOKEN}"]
    assert sent
    captured = capsys.readouterr()
    assert TOKEN not in captured.out and TOKEN not in captured.err
    assert TOKEN not in caplog.text
    assert log_file.stat().st_size > 0
    written = [p for root_dir in (isolated_home, hf_env.parent) for p in root_dir.rglob("*") if p.is_file()]
    assert any(p.name == "settings.json" for p in written)
    assert any(p.name == "models.json" for p in written)
    for path in written:
        assert TOKEN.encode() not in path.read_bytes(), path
    json.loads(settings.settings_path().read_text())  # still a valid settings file


def test_import_of_a_model_that_is_no_sqale_agent_warns_as_the_window_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from sqale_desktop.core.models.gguf_info import fitness_warning, read_gguf_info
    from tests.helpers import smollm2_gguf

    assert cli.main(["models", "import", str(smollm2_gguf())]) == 0  # imported all the same
    captured = capsys.readouterr()
    model_id = captured.out.split("\t")[0]
    record = Registry().get(model_id)
    window_says = fitness_warning(read_gguf_info(record.path), record.source_checkpoint)
    assert window_says is not None and "not one of the SQaLe agents" in window_says
    assert captured.err == f"warning: {window_says}\n"
