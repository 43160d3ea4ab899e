"""Settings: defaults from the model card, round trip, tolerance of old/corrupt files, no secrets."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from sqale_desktop.core import paths, settings
from sqale_desktop.core.settings import Settings


def test_defaults_follow_the_model_card() -> None:
    s = Settings()
    assert (s.temperature, s.top_p, s.top_k, s.min_p) == (0.6, 0.95, 20, 0.0)
    assert s.n_ctx == 16384
    assert s.engine == "llama"
    assert s.gpu_layers == "auto"
    assert s.schema_version == settings.SCHEMA_VERSION


def test_missing_file_gives_defaults_without_note() -> None:
    result = settings.load()
    assert result.settings == Settings()
    assert result.note is None


def test_round_trip_under_config_dir(isolated_home: Path) -> None:
    s = Settings(engine="openai", gpu_layers=12, temperature=0.2, model_id="abc")
    s.add_recent_database("/tmp/a.sqlite")
    written = settings.save(s)
    assert written.parent == paths.config_dir()
    assert str(written).startswith(str(isolated_home))
    loaded = settings.load()
    assert loaded.note is None
    assert loaded.settings == s


def test_recent_databases_most_recent_first_unique_and_capped() -> None:
    s = Settings()
    for i in range(settings.RECENT_DATABASES_CAP + 5):
        s.add_recent_database(f"/db/{i}.sqlite")
    s.add_recent_database("/db/7.sqlite")
    assert s.recent_databases[0] == "/db/7.sqlite"
    assert len(s.recent_databases) == settings.RECENT_DATABASES_CAP
    assert len(set(s.recent_databases)) == len(s.recent_databases)


@pytest.mark.parametrize(
    ("named", "read"), [("openai", "openai"), ("replay", "replay"), ("recording", "llama")]
)
def test_the_engine_is_one_of_the_kinds_the_settings_may_name(named: str, read: str) -> None:
    """``core.engine_kinds`` says which kinds those are: the recording is played from the chat only."""
    settings.settings_path().write_text(json.dumps({"engine": named}))
    result = settings.load()
    assert result.settings.engine == read
    assert (result.note is None) == (named == read)


def test_unknown_keys_tolerated_and_bad_values_reported() -> None:
    path = settings.settings_path()
    path.write_text(
        json.dumps(
            {
                "schema_version": 0,
                "from_the_future": True,
                "engine": "gpt-9",
                "gpu_layers": "all",
                "top_k": "twenty",
                "temperature": 1,
            }
        )
    )
    result = settings.load()
    assert result.settings.engine == "llama"
    assert result.settings.gpu_layers == "all"
    assert result.settings.top_k == 20
    assert result.settings.temperature == 1.0 and isinstance(result.settings.temperature, float)
    assert result.note is not None and "engine" in result.note and "top_k" in result.note


def test_corrupt_file_falls_back_with_note() -> None:
    settings.settings_path().write_text('{"engine": "llama",')
    result = settings.load()
    assert result.settings == Settings()
    assert result.note is not None and "corrupt" in result.note


def test_non_object_json_is_corrupt() -> None:
    settings.settings_path().write_text("[1, 2]")
    assert settings.load().note is not None


def test_saved_file_has_no_secret_fields() -> None:
    path = settings.save(Settings())
    data = json.loads(path.read_text())
    assert not any("token" in key or "key" in key for key in data)
    assert not list(path.parent.glob(".settings-*"))


def _load_with(values: dict[str, object]) -> settings.LoadResult:
    settings.settings_path().write_text(json.dumps({"schema_version": 1, **values}))
    return settings.load()


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("query_time_limit_s", 0),
        ("n_ctx", 0),
        ("max_rows", 0),
        ("query_time_limit_s", -1.5),
        ("n_ctx", 10**9),
        ("temperature", 7.0),
        ("gpu_layers", 100_000),
        ("top_p", float("nan")),
    ],
)
def test_out_of_range_values_fall_back_to_their_default_with_a_note(key: str, bad: object) -> None:
    """A value that would make every database open or episode fail never reaches the app."""
    result = _load_with({key: bad, "top_k": 40})
    assert getattr(result.settings, key) == getattr(Settings(), key)
    assert result.settings.top_k == 40  # the good values beside it are kept
    assert result.note is not None and key in result.note


def test_the_limits_themselves_are_accepted() -> None:
    edges = {name: low for name, (low, _high) in settings.LIMITS.items()}
    result = _load_with(edges)
    assert result.note is None
    assert all(getattr(result.settings, name) == low for name, low in edges.items())
    edges = {name: high for name, (_low, high) in settings.LIMITS.items()}
    assert _load_with(edges).note is None


def test_every_number_has_limits_and_the_defaults_are_inside() -> None:
    defaults = Settings()
    numbers = {
        f.name
        for f in dataclasses.fields(Settings)
        if f.name != "schema_version" and isinstance(getattr(defaults, f.name), int | float)
    } | {"gpu_layers"}
    assert numbers == set(settings.LIMITS)
    for name, (low, high) in settings.LIMITS.items():
        value = getattr(defaults, name)
        assert isinstance(value, str) or low <= value <= high, name


@pytest.mark.parametrize(
    "raw",
    [b'{"engine": "llama", "theme": "\xff"}', b"[" * 100_000 + b"]" * 100_000, b'{"a": ' * 100_000 + b"1"],
    ids=["invalid-utf8", "nested-array", "nested-object"],
)
def test_damaged_files_fall_back_to_the_defaults_with_a_note(raw: bytes) -> None:
    """One bad byte or a file nested 100,000 deep must not stop the window from starting."""
    settings.settings_path().write_bytes(raw)
    result = settings.load()
    assert result.settings == Settings()
    assert result.note is not None and "corrupt" in result.note


def test_the_per_turn_tool_budget_and_csv_formulas_are_settings() -> None:
    defaults = Settings()
    assert (defaults.turn_tool_time_s, defaults.csv_formulas) == (30.0, "keep")
    result = _load_with({"turn_tool_time_s": 90, "csv_formulas": "sanitize"})
    assert (result.settings.turn_tool_time_s, result.settings.csv_formulas) == (90.0, "sanitize")
    bad = _load_with({"turn_tool_time_s": 0, "csv_formulas": "yes"})
    assert (bad.settings.turn_tool_time_s, bad.settings.csv_formulas) == (30.0, "keep")
    assert bad.note is not None and "turn_tool_time_s" in bad.note and "csv_formulas" in bad.note
