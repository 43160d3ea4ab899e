"""The app's settings: one typed object, stored as JSON under ``paths.config_dir()``.

Never secrets: the hub token and server API keys live in the OS keyring (``core.secrets``).
Defaults follow the model card (sampling as in GRPO training, a 16k context).  Reading is
forgiving on purpose: unknown keys (from a newer version) and keys of the wrong type or out of
range (:data:`LIMITS`) are ignored one by one, and a corrupt file falls back to the defaults with
a note for the user, so a bad settings file never stops the app from starting.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from sqale_desktop.core import json_input, paths
from sqale_desktop.core.engine_kinds import LLAMA, SETTINGS_ENGINES, EngineKind
from sqale_desktop.core.engine_options import GpuLayers, GpuLayersMode, Speculation
from sqale_desktop.core.providers import DEFAULT_PRICES, FEATHERLESS
from sqale_desktop.core.server_usage import Prices

SCHEMA_VERSION = 1
SETTINGS_FILE = "settings.json"
RECENT_DATABASES_CAP = 10

Theme = Literal["system", "light", "dark"]
# CSV cells that start like a formula (=, +, -, @, tab, CR) are run by spreadsheet apps;
# "sanitize" writes them with a leading apostrophe (see core.export_formats), "keep" unchanged.
CsvFormulas = Literal["keep", "sanitize"]

# The range of every number the user can set: checked when the file is read (a value outside it
# falls back to its default, with a note) and used as the settings dialog's spin-box bounds, so the
# two never disagree.  Zero is outside most of them on purpose: a 0 s query limit, a 0-token
# context or 0 rows would make every database open or every episode fail.  Integers for the
# integer fields, floats for the others.
LIMITS: dict[str, tuple[int, int] | tuple[float, float]] = {
    "gpu_layers": (0, 999),  # a count of layers; the words ("auto", "all", "none") are checked apart
    "n_threads": (0, 256),  # 0: one thread per physical core
    "n_ctx": (2048, 262_144),
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "top_k": (0, 1000),  # 0: off
    "min_p": (0.0, 1.0),
    "query_time_limit_s": (0.5, 3600.0),
    "turn_tool_time_s": (1.0, 3600.0),
    "query_memory_limit_mb": (256, 1_048_576),  # the database worker's address space (core/db/process.py)
    "max_rows": (1, 10_000_000),
    # dollars per million tokens of a server's reported usage (core/server_usage.py)
    "price_input": (0.0, 10_000.0),
    "price_cached_input": (0.0, 10_000.0),
    "price_output": (0.0, 10_000.0),
    "import_cache_limit_mb": (64, 1_048_576),  # the imported files' cache (core/imports/cache_bound.py)
    "import_write_limit_mb": (16, 1_048_576),  # what one import may write (core/imports/limits.py)
}

GPU_LAYER_MODES: tuple[str, ...] = get_args(GpuLayersMode)
THEMES: tuple[str, ...] = get_args(Theme)
CSV_FORMULAS: tuple[str, ...] = get_args(CsvFormulas)
SPECULATION: tuple[str, ...] = get_args(Speculation)


@dataclass
class Settings:
    """Everything the user can choose that is not a secret.

    ``model_id`` is a registry id (``core.models.registry``), not a path, so a model moved or
    re-downloaded keeps its place; empty means "none chosen yet" (the catalog's default
    checkpoint, M_SynSQL, is what the model manager then offers first).  ``n_threads == 0``
    means one thread per physical core.  ``speculation`` is prompt-lookup speculative decoding
    in the local engine ("auto" stops drafting where it does not pay on this computer).
    """

    schema_version: int = SCHEMA_VERSION
    engine: EngineKind = LLAMA
    server_url: str = "http://127.0.0.1:8000/v1"
    server_model: str = ""
    """The model id sent to the server (a hosted provider serves many); empty: the server's first
    (``/v1/models``)."""
    price_input: float = DEFAULT_PRICES.input
    price_cached_input: float = DEFAULT_PRICES.cached_input
    price_output: float = DEFAULT_PRICES.output
    """Dollars per million tokens of a server's reported usage: input, input its prefix cache
    served, output.  The defaults are the hosted model's (``core.providers``); a local
    server's are 0."""
    model_id: str = ""
    gpu_layers: GpuLayers = "auto"
    gpu_device: str = ""
    """The GPU to offload to (``Vulkan1``) where there are several; empty: the most free memory."""
    n_threads: int = 0
    n_ctx: int = 16384
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 20
    min_p: float = 0.0
    query_time_limit_s: float = 10.0
    turn_tool_time_s: float = 30.0
    """The wall-clock time the tool calls of one agent turn share (the loop's per-turn budget)."""
    query_memory_limit_mb: int = 2048
    max_rows: int = 1000
    import_cache_limit_mb: int = 2048
    """The imported files' cache is trimmed to this, least recently used first (never an open one)."""
    import_write_limit_mb: int = 8192
    """The most one import writes to a file: a small compressed file (a Parquet run, a .gz) can
    expand to gigabytes; past this it stops with a message, nothing kept."""
    recent_databases: list[str] = field(default_factory=list)
    theme: Theme = "system"
    open_databases: list[str] = field(default_factory=list)
    """The tabs open when the app last closed, reopened on start (empty: the demo shop)."""
    active_database: str = ""
    """The one of them that was in front; it comes back in front."""
    export_folder: str = ""  # where the last export went; the export dialog starts there
    speculation: Speculation = "off"
    csv_formulas: CsvFormulas = "keep"
    """Off by default ("keep"), so exported data round-trips byte for byte."""

    def prices(self) -> Prices:
        """The prices an answer's cost is computed at, saying whether they are the defaults."""
        figures = (self.price_input, self.price_cached_input, self.price_output)
        default = figures == (DEFAULT_PRICES.input, DEFAULT_PRICES.cached_input, DEFAULT_PRICES.output)
        source = f"the default prices: {FEATHERLESS.source}" if default else "the prices in the settings"
        return Prices(*figures, source=source)

    def add_recent_database(self, path: str | os.PathLike[str]) -> None:
        """Move ``path`` to the front of the recent list, keeping it short and free of repeats."""
        text = str(path)
        rest = [p for p in self.recent_databases if p != text]
        self.recent_databases = [text, *rest][:RECENT_DATABASES_CAP]


@dataclass(frozen=True)
class LoadResult:
    """Settings as read, plus a note for the user when the file could not be used as it was."""

    settings: Settings
    note: str | None = None


def settings_path() -> Path:
    return paths.config_dir() / SETTINGS_FILE


def _in_limits(name: str, value: int | float) -> bool:
    low, high = LIMITS[name]
    return low <= value <= high  # False for NaN, which JSON may carry


def _valid(name: str, value: Any) -> bool:
    """Whether ``value`` read from JSON is acceptable for field ``name`` (type, then range)."""
    if name == "engine":
        return value in SETTINGS_ENGINES  # the kinds the settings may name (core.engine_kinds)
    if name == "theme":
        return value in THEMES
    if name == "speculation":
        return value in SPECULATION
    if name == "csv_formulas":
        return value in CSV_FORMULAS
    if name == "gpu_layers":
        if isinstance(value, str):
            return value in GPU_LAYER_MODES
        return isinstance(value, int) and not isinstance(value, bool) and _in_limits(name, value)
    if name in ("recent_databases", "open_databases"):
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    default = getattr(Settings(), name)
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool) and _in_limits(name, value)
    if isinstance(default, float):
        return isinstance(value, int | float) and not isinstance(value, bool) and _in_limits(name, value)
    if isinstance(default, str):
        return isinstance(value, str)
    return False


def from_dict(data: dict[str, Any]) -> tuple[Settings, list[str]]:
    """Build settings from a JSON object; returns the keys that were ignored as invalid.

    Unknown keys are dropped silently (a newer version may have written them); known keys with a
    bad value fall back to their default and are reported.
    """
    values: dict[str, Any] = {}
    rejected: list[str] = []
    for f in dataclasses.fields(Settings):
        if f.name == "schema_version" or f.name not in data:
            continue
        value = data[f.name]
        if _valid(f.name, value):
            if isinstance(getattr(Settings(), f.name), float):
                value = float(value)
            values[f.name] = value
        else:
            rejected.append(f.name)
    settings = Settings(**values)
    settings.recent_databases = settings.recent_databases[:RECENT_DATABASES_CAP]
    return settings, rejected


def to_dict(settings: Settings) -> dict[str, Any]:
    data = dataclasses.asdict(settings)
    data["schema_version"] = SCHEMA_VERSION
    return data


def load(path: Path | None = None) -> LoadResult:
    """Read the settings file; a missing file gives the defaults, a broken one a note too."""
    target = path or settings_path()
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        return LoadResult(Settings())
    except OSError as exc:
        return LoadResult(Settings(), f"Could not read settings ({exc.strerror}); using defaults.")
    try:
        # decoding inside the try too: one byte that is not UTF-8 is a corrupt file, not a crash
        data = json_input.loads(raw)
    except ValueError as exc:
        return LoadResult(Settings(), f"The settings file {target} is corrupt ({exc}); using defaults.")
    if not isinstance(data, dict):
        return LoadResult(Settings(), f"The settings file {target} is corrupt; using defaults.")
    settings, rejected = from_dict(data)
    note = None
    if rejected:
        note = "Ignored invalid settings (defaults used): " + ", ".join(sorted(rejected)) + "."
    return LoadResult(settings, note)


def save(settings: Settings, path: Path | None = None) -> Path:
    """Write atomically (temp file + rename) so a crash mid-write never leaves a corrupt file."""
    target = path or settings_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(to_dict(settings), indent=2, sort_keys=True) + "\n"
    fd, tmp_name = tempfile.mkstemp(prefix=".settings-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target
