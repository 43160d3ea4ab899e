"""``core.runtime``: which engine the settings ask for; nothing is loaded until the factory runs."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from sqale_desktop.core.models.registry import Registry
from sqale_desktop.core.runtime import ChoiceError, EngineFlags, ModelChoice, choose, fit_protocol, resolve
from sqale_desktop.core.settings import Settings
from tests.helpers import smollm2_gguf as smollm2


def test_no_model_installed_means_no_factory() -> None:
    choice = resolve(Settings())
    assert choice.factory is None and "no model" in choice.description


def test_installed_model_is_chosen_with_the_users_sampling() -> None:
    record = Registry().import_file(smollm2())
    settings = dataclasses.replace(Settings(), temperature=0.2, top_k=5, n_ctx=4096, gpu_layers="none")
    choice = resolve(settings)
    assert choice.factory is not None
    assert record.name in choice.description
    assert choice.protocol.sampling.temperature == 0.2 and choice.protocol.sampling.top_k == 5
    assert choice.protocol.context_tokens == 4096


def test_missing_model_file_falls_back_to_no_model(tmp_path: Path) -> None:
    copy = tmp_path / "copy.gguf"
    copy.write_bytes(smollm2().read_bytes())
    record = Registry().import_file(copy)
    copy.unlink()
    assert resolve(dataclasses.replace(Settings(), model_id=record.id)).factory is None


def test_server_engine_builds_without_connecting() -> None:
    choice = resolve(dataclasses.replace(Settings(), engine="openai", server_url="http://127.0.0.1:9/v1"))
    assert choice.factory is not None and choice.description == "server http://127.0.0.1:9/v1"
    engine = choice.factory()
    assert "127.0.0.1:9" in engine.describe()


def test_context_above_the_models_training_is_clamped_when_the_engine_is_built() -> None:
    record = Registry().import_file(smollm2())  # trained for 8,192 tokens
    settings = dataclasses.replace(Settings(), model_id=record.id, n_ctx=16384, gpu_layers="none")
    choice = resolve(settings)
    assert choice.factory is not None
    engine = choice.factory()
    try:
        assert engine.n_ctx == 8192  # type: ignore[attr-defined]
        # the registry's hash goes with the engine: its saved states need not read the file for it
        assert engine.model_sha256 == record.sha256  # type: ignore[attr-defined]
    finally:
        close = getattr(engine, "close", None)
        if callable(close):
            close()
    # The episode's budgets follow the engine's context (three quarters for the episode).
    fitted = fit_protocol(choice.protocol, 8192)
    assert fitted is not None and fitted.context_tokens == 8192 and fitted.episode_tokens == 6144
    assert fit_protocol(choice.protocol, 32768) is choice.protocol
    assert fit_protocol(None, None) is None


def test_the_llama_choice_without_a_path_is_the_installed_model() -> None:
    record = Registry().import_file(smollm2())
    runtime = resolve(Settings(model_id=record.id), ModelChoice("llama"))
    assert runtime.factory is not None  # chosen; loaded only when the factory runs
    assert runtime.model_path == Path(record.path)
    assert runtime.model_dir == Path(record.model_dir)  # its sqale_agent.py / generation_config.json


def test_a_gguf_path_reads_its_protocol_from_its_folder(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    (tmp_path / "sqale_agent.py").write_text('SYSTEM_PROMPT = "Mine."\nUSER_TEMPLATE = "Q: {question}"\n')
    settings = dataclasses.replace(Settings(), temperature=0.1, min_p=0.05, n_ctx=2048)
    runtime = resolve(settings, ModelChoice("llama", model_path=gguf))
    assert runtime.model_dir == tmp_path and runtime.protocol.system_prompt == "Mine."
    assert (runtime.protocol.sampling.temperature, runtime.protocol.sampling.min_p) == (0.1, 0.05)
    assert runtime.protocol.context_tokens == 2048
    assert runtime.description == "m.gguf (not loaded yet)"


def test_the_database_gets_the_settings_time_limit(chinook: Path) -> None:
    runtime = resolve(dataclasses.replace(Settings(), query_time_limit_s=2.5))
    db = runtime.open_database(chinook)
    try:
        assert db.time_limit_s == 2.5
    finally:
        db.close()


def test_a_retuned_runtime_keeps_its_engine_and_follows_the_new_settings(
    tmp_path: Path, chinook: Path
) -> None:
    """What the window does with a change that does not concern the engine: the same factory, the
    protocol as :func:`resolve` builds it for the new settings, their query time limit."""
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    (tmp_path / "sqale_agent.py").write_text('SYSTEM_PROMPT = "Mine."\nUSER_TEMPLATE = "Q: {question}"\n')
    choice = ModelChoice("llama", model_path=gguf)
    runtime = resolve(Settings(), choice)
    new = dataclasses.replace(Settings(), temperature=0.2, top_k=5, max_rows=3, query_time_limit_s=2.5)
    retuned = runtime.retune(new)
    assert retuned.factory is runtime.factory and retuned.description == runtime.description
    assert retuned.protocol == resolve(new, choice).protocol and retuned.protocol.system_prompt == "Mine."
    assert (retuned.protocol.sampling.temperature, retuned.protocol.sampling.top_k) == (0.2, 5)
    assert retuned.settings is new and runtime.settings == Settings()
    db = retuned.open_database(chinook)
    try:
        assert db.time_limit_s == 2.5
    finally:
        db.close()


def test_what_each_kind_means_is_read_from_one_table() -> None:
    from sqale_desktop.core.engine_kinds import KINDS, SETTINGS_ENGINES, kind_of
    from sqale_desktop.core.runtime import COMMAND_ENGINES, ENGINES

    assert list(KINDS) == list(ENGINES)  # every kind has a builder, every builder a meaning
    assert SETTINGS_ENGINES == COMMAND_ENGINES == ("llama", "openai", "replay")
    assert [k for k, kind in KINDS.items() if kind.recording] == ["recording"]
    assert [k for k, kind in KINDS.items() if kind.model_file] == ["llama"]
    assert [k for k, kind in KINDS.items() if kind.server and kind.needs_url] == ["openai"]
    assert kind_of("openai") is KINDS["openai"] and kind_of("gpt") is None
    assert resolve(Settings(), ModelChoice("recording", completions=("a",))).kind_facts.recording


def test_every_kind_is_built_from_the_one_table(tmp_path: Path) -> None:
    from sqale_desktop.core.runtime import ENGINES

    script = tmp_path / "script.json"
    script.write_text('["</think>SELECT 1"]', encoding="utf-8")
    choices = {
        "openai": ModelChoice("openai", base_url="http://127.0.0.1:9/v1"),
        "replay": ModelChoice("replay", replay=script),
        "recording": ModelChoice("recording", completions=("a",)),
    }
    assert set(ENGINES) == {"llama", *choices}
    for kind, choice in choices.items():
        runtime = resolve(Settings(), choice)
        assert runtime.kind == kind and runtime.factory is not None and runtime.concurrent
    assert not resolve(Settings(), ModelChoice("llama")).concurrent  # one episode at a time


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (EngineFlags(engine="replay"), "--engine replay needs --replay FILE"),
        (EngineFlags(engine="openai"), "--engine openai needs --base-url URL"),
        (EngineFlags(model=Path("/nonexistent/m.gguf")), "no model file at"),
        (EngineFlags(), "--engine llama needs --model GGUF_PATH, or an installed model"),
        (EngineFlags(engine="recording"), "unknown engine 'recording'"),
    ],
)
def test_flags_that_cannot_work_are_refused_with_the_missing_flag(flags: EngineFlags, message: str) -> None:
    with pytest.raises(ChoiceError, match=re.escape(message)):
        choose(Settings(), flags)


def test_without_an_engine_flag_the_settings_engine_is_chosen() -> None:
    """``ask`` and ``eval run`` share this default: the window's engine, not always llama."""
    settings = dataclasses.replace(Settings(), engine="openai", server_url="http://127.0.0.1:9/v1")
    keys: list[str] = []

    def key() -> str:
        keys.append("read")
        return "k"

    runtime = choose(settings, EngineFlags(api_key=key))
    assert (runtime.kind, runtime.description) == ("openai", "server http://127.0.0.1:9/v1")
    assert runtime.choice.api_key == "k"
    assert choose(settings, EngineFlags(replay=Path("s.json"), api_key=key)).kind == "replay"
    assert keys == ["read"]  # the keyring is read for a server only
