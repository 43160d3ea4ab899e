"""Where the app keeps its own files.

Everything lives under platformdirs' per-user folders, or under ``SQALE_DESKTOP_HOME`` when that
variable is set (tests point it at a temporary folder, like llm's ``LLM_USER_PATH``).  Model files
themselves stay in the Hugging Face cache or wherever the user imported them from.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "sqale-desktop"
HOME_ENV = "SQALE_DESKTOP_HOME"


def _root(kind: str) -> Path:
    override = os.environ.get(HOME_ENV)
    if override:
        return Path(override) / kind
    if kind == "data":
        return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    if kind == "config":
        return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))
    if kind == "cache":
        return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))
    return Path(platformdirs.user_log_dir(APP_NAME, appauthor=False))


def data_dir() -> Path:
    """Conversation history, the model registry, the demo database."""
    return _ensure(_root("data"))


def config_dir() -> Path:
    """The settings file (never secrets: those live in the OS keyring)."""
    return _ensure(_root("config"))


def cache_dir() -> Path:
    """Disposable files: intermediate conversion outputs, thumbnails."""
    return _ensure(_root("cache"))


def log_dir() -> Path:
    """Log files (never tokens or API keys)."""
    return _ensure(_root("log"))


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
