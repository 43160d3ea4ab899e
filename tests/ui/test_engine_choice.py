"""Which engine the settings ask for; nothing is loaded until the agent thread calls the factory."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sqale_desktop.core.models.registry import Registry
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.engine_choice import engine_choice
from tests.ui.test_dialogs import smollm2


def test_no_model_installed_means_no_factory() -> None:
    choice = engine_choice(Settings())
    assert choice.factory is None and "no model" in choice.description


def test_installed_model_is_chosen_with_the_users_sampling() -> None:
    record = Registry().import_file(smollm2())
    settings = dataclasses.replace(Settings(), temperature=0.2, top_k=5, n_ctx=4096, gpu_layers="none")
    choice = engine_choice(settings)
    assert choice.factory is not None
    assert record.name in choice.description
    assert choice.protocol.sampling.temperature == 0.2 and choice.protocol.sampling.top_k == 5
    assert choice.protocol.context_tokens == 4096


def test_missing_model_file_falls_back_to_no_model(tmp_path: Path) -> None:
    copy = tmp_path / "copy.gguf"
    copy.write_bytes(smollm2().read_bytes())
    record = Registry().import_file(copy)
    copy.unlink()
    assert engine_choice(dataclasses.replace(Settings(), model_id=record.id)).factory is None


def test_server_engine_builds_without_connecting() -> None:
    choice = engine_choice(
        dataclasses.replace(Settings(), engine="openai", server_url="http://127.0.0.1:9/v1")
    )
    assert choice.factory is not None and choice.description == "server http://127.0.0.1:9/v1"
    engine = choice.factory()
    assert "127.0.0.1:9" in engine.describe()


def test_context_above_the_models_training_is_clamped_when_the_engine_is_built() -> None:
    from sqale_desktop.ui.episodes import fit_protocol

    record = Registry().import_file(smollm2())  # trained for 8,192 tokens
    settings = dataclasses.replace(Settings(), model_id=record.id, n_ctx=16384, gpu_layers="none")
    choice = engine_choice(settings)
    assert choice.factory is not None
    engine = choice.factory()
    try:
        assert engine.n_ctx == 8192  # type: ignore[attr-defined]
    finally:
        close = getattr(engine, "close", None)
        if callable(close):
            close()
    # The episode's budgets follow the engine's context (three quarters for the episode).
    fitted = fit_protocol(choice.protocol, 8192)
    assert fitted is not None and fitted.context_tokens == 8192 and fitted.episode_tokens == 6144
    assert fit_protocol(choice.protocol, 32768) is choice.protocol
    assert fit_protocol(None, None) is None
