"""The engine flags ``ask`` and ``eval run`` share, declared once, and what they turn into.

Which engine (``--engine``, ``--model``, ``--model-dir``, ``--base-url``, ``--server-model``,
``--replay``) and the settings over the app's own (``--temperature`` … ``--speculation``, and for
``ask`` the query time limit and the row cap).  The flags decide nothing themselves: they become
an :class:`~sqale_desktop.core.runtime.EngineFlags` and a :class:`~sqale_desktop.core.settings.Settings`,
and ``core.runtime.choose`` decides from those, as it does for the window.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqale_desktop.core.runtime import COMMAND_ENGINES, EngineFlags

if TYPE_CHECKING:
    from sqale_desktop.core.settings import Settings

API_KEY_ENV = "SQALE_DESKTOP_API_KEY"

# Each settings flag and the Settings field it overrides.
_SETTINGS_FIELDS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "n_ctx": "n_ctx",
    "gpu_layers": "gpu_layers",
    "threads": "n_threads",
    "speculation": "speculation",
    "time_limit": "query_time_limit_s",
    "max_rows": "max_rows",
}


def add_engine_flags(parser: argparse.ArgumentParser, *, servers: bool, replay_help: str) -> None:
    """The engine choice: ``servers`` lets ``--base-url`` repeat (a run spread over several
    servers); ``replay_help`` says what the command's ``--replay`` file holds."""
    parser.add_argument(
        "--engine",
        choices=COMMAND_ENGINES,
        help="llama: the model in-process (default), one episode at a time; openai: an "
        "OpenAI-compatible server (--base-url); replay: scripted completions (--replay)",
    )
    parser.add_argument(
        "--model",
        metavar="GGUF_PATH",
        help="GGUF model file (for --engine llama; default: the installed model the app uses)",
    )
    parser.add_argument(
        "--model-dir",
        metavar="DIR",
        help="folder with the model's sqale_agent.py and generation_config.json (default: the GGUF's folder)",
    )
    parser.add_argument(
        "--base-url",
        action="append" if servers else "store",
        metavar="URL",
        help=f"OpenAI-compatible server, e.g. http://127.0.0.1:8000 (API key from ${API_KEY_ENV} or the "
        "keyring)" + ("; repeat to spread episodes over several servers" if servers else ""),
    )
    parser.add_argument(
        "--server-model", metavar="NAME", help="model name to ask the server for (default: its first)"
    )
    parser.add_argument("--replay", metavar="FILE", help=replay_help)


def add_settings_flags(parser: argparse.ArgumentParser, *, limits: bool = True) -> None:
    """Flags over the app's settings: without them a command runs as the window would
    (``limits``: also the query time limit and the answer's row cap)."""
    group = parser.add_argument_group(
        "settings", "default: the app's settings (Settings dialog), so the CLI answers as the window does"
    )
    group.add_argument("--temperature", type=_non_negative(float), metavar="T")
    group.add_argument("--top-p", type=_non_negative(float), metavar="P")
    group.add_argument("--top-k", type=_non_negative(int), metavar="K")
    group.add_argument("--min-p", type=_non_negative(float), metavar="P")
    group.add_argument(
        "--n-ctx", type=_positive(int), metavar="TOKENS", help="context window of the llama engine"
    )
    group.add_argument(
        "--gpu-layers", type=_gpu_layers, metavar="N|auto|all|none", help="layers offloaded to the GPU"
    )
    group.add_argument(
        "--threads", type=_non_negative(int), metavar="N", help="CPU threads (0: one per core)"
    )
    group.add_argument(
        "--speculation", choices=("off", "on", "auto"), help="prompt-lookup speculative decoding (llama)"
    )
    if not limits:
        return
    group.add_argument("--time-limit", type=_positive(float), metavar="SECONDS", help="per query")
    group.add_argument("--max-rows", type=_positive(int), metavar="N", help="rows kept of the answer")


def settings_from(args: argparse.Namespace) -> Settings:
    """The app's settings (a note on stderr when the file was unusable) with the flags over them."""
    from sqale_desktop.core.settings import load as load_settings

    loaded = load_settings()
    if loaded.note:
        print(f"note: {loaded.note}", file=sys.stderr)
    given = {field: getattr(args, flag, None) for flag, field in _SETTINGS_FIELDS.items()}
    return dataclasses.replace(loaded.settings, **{k: v for k, v in given.items() if v is not None})


def base_urls(args: argparse.Namespace) -> list[str]:
    """Every ``--base-url`` given (one for ``ask``, any number for ``eval run``)."""
    given = args.base_url
    if given is None:
        return []
    return list(given) if isinstance(given, list) else [given]


def engine_flags(args: argparse.Namespace) -> EngineFlags:
    """The engine flags as given, for ``core.runtime.choose`` (the first server is the runtime's)."""
    urls = base_urls(args)
    return EngineFlags(
        engine=args.engine,
        model=Path(args.model) if args.model else None,
        model_dir=Path(args.model_dir) if args.model_dir else None,
        base_url=urls[0] if urls else None,
        server_model=args.server_model,
        api_key=api_key,
        replay=Path(args.replay) if args.replay else None,
    )


def api_key() -> str | None:
    """The server's API key: the environment first (scripts), then the keyring (the app's store)."""
    key = os.environ.get(API_KEY_ENV)
    if key:
        return key
    try:
        from sqale_desktop.core import secrets

        return secrets.get_secret(secrets.SERVER_API_KEY)
    except Exception:  # no keyring, a locked one, or none installed: run without a key
        return None


def _non_negative(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"must not be negative: {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its message
    return parse


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0: {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _gpu_layers(text: str) -> int | str:
    if text in ("auto", "all", "none"):
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"auto, all, none or a number of layers, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value
