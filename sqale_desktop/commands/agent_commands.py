"""``sqale-desktop ask``: one agent episode from the shell, the same job as the model card's reference loop.

The episode loop is the same generator the app runs; this command only decides how to print its
events: ``--trace`` streams thinking, calls and results as they happen, ``--json`` prints the
finished episode, and the default prints the answer and its rows.  Ctrl-C stops the episode the way
the app's Stop button does (flag plus database interrupt) and still prints what there is.

Exit status: 0 an answer was found, 1 no answer / an engine or database error / cancelled,
2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from sqale_desktop.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from sqale_desktop.core.agent.events import (
    BudgetUpdated,
    Episode,
    EpisodeEnded,
    Event,
    FinalAnswer,
    TextDelta,
    ToolCalled,
    ToolResulted,
    TurnStarted,
)
from sqale_desktop.core.agent.loop import EpisodeControl, run_episode
from sqale_desktop.core.agent.protocol import load_protocol
from sqale_desktop.core.engines.base import Engine, EngineError

API_KEY_ENV = "SQALE_DESKTOP_API_KEY"
PRINTED_ROWS = 20


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    ask = subparsers.add_parser(
        "ask",
        help="ask a question about a database; the agent answers with SQL",
        description="Run one agent episode: the model explores the database with its tools and "
        "answers with a SQL query, which is run read-only. Exit status: 0 an answer was found, "
        "1 no answer, an error or cancelled, 2 bad usage.",
    )
    ask.add_argument("--db", required=True, metavar="PATH", help="SQLite database file (opened read-only)")
    ask.add_argument("--question", required=True, metavar="TEXT", help="the question, in plain language")
    ask.add_argument(
        "--model",
        metavar="GGUF_PATH",
        help="GGUF model file (for --engine llama; default: the installed model the app uses)",
    )
    ask.add_argument(
        "--engine",
        choices=("llama", "openai", "replay"),
        help="llama: the model in-process (default); openai: an OpenAI-compatible server "
        "(--base-url); replay: scripted completions (--replay)",
    )
    ask.add_argument("--replay", metavar="FILE", help="JSON list of completions, or a recorded episode")
    ask.add_argument(
        "--base-url",
        metavar="URL",
        help=f"OpenAI-compatible server, e.g. http://127.0.0.1:8000 (API key from ${API_KEY_ENV} "
        "or the keyring)",
    )
    ask.add_argument(
        "--server-model", metavar="NAME", help="model name to ask the server for (default: its first)"
    )
    ask.add_argument(
        "--model-dir",
        metavar="DIR",
        help="folder with the model's sqale_agent.py and generation_config.json (default: the GGUF's folder)",
    )
    ask.add_argument("--trace", action="store_true", help="print thinking, calls and results as they stream")
    ask.add_argument("--json", action="store_true", help="print the finished episode as JSON")
    ask.set_defaults(handler=run_ask)


def run_ask(args: argparse.Namespace) -> int:
    kind = args.engine or ("replay" if args.replay else "openai" if args.base_url else "llama")
    try:
        engine = _engine(kind, args)
    except _Usage as exc:
        print(f"sqale-desktop ask: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except EngineError as exc:
        print(f"sqale-desktop ask: {exc}", file=sys.stderr)
        return EXIT_FAILED
    from sqale_desktop.core.db import DatabaseError, open_readonly
    from sqale_desktop.core.tools import ToolBox

    try:
        db = open_readonly(args.db)
    except DatabaseError as exc:
        print(f"sqale-desktop ask: {exc}", file=sys.stderr)
        return EXIT_FAILED
    protocol = load_protocol(_model_dir(args))
    trace_out = sys.stderr if args.json else sys.stdout
    for note in protocol.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.trace:
        print(f"engine: {engine.describe()}; prompt: {protocol.prompt_source}", file=trace_out)
    control = EpisodeControl(db)
    episode: Episode | None = None
    try:
        with _stop_on_ctrl_c(control):
            events = run_episode(args.question, db, ToolBox(db), engine, protocol, cancel=control.event)
            for event in events:
                if args.trace:
                    _trace(event, trace_out)
                if isinstance(event, EpisodeEnded):
                    episode = event.episode
    finally:
        db.close()
        close = getattr(engine, "close", None)
        if callable(close):
            close()
    assert episode is not None  # run_episode always ends with EpisodeEnded
    if args.json:
        print(json.dumps(episode.to_json(), ensure_ascii=False, default=_json_default))
    else:
        _summary(episode, sys.stdout)
    if episode.error:
        print(f"sqale-desktop ask: {episode.error}", file=sys.stderr)
    return EXIT_OK if episode.sql and episode.ended_by not in ("cancelled", "error") else EXIT_FAILED


def _installed_model() -> Any:
    """The model the app would use (the settings' choice, else the first installed one)."""
    from sqale_desktop.core.models.registry import Registry
    from sqale_desktop.core.settings import load as load_settings

    return Registry().usable(load_settings().settings.model_id)


def _model_dir(args: argparse.Namespace) -> Path | None:
    """Where the model's sqale_agent.py / generation_config.json are looked for."""
    if args.model_dir:
        return Path(args.model_dir)
    return Path(args.model).parent if args.model else None


class _Usage(Exception):
    """A combination of options that cannot work; the message says which."""


def _engine(kind: str, args: argparse.Namespace) -> Engine:
    """Build the engine; for llama without --model it fills ``args.model`` and ``args.model_dir``
    from the installed model, so ``_model_dir`` (called afterwards) finds its sqale_agent.py."""
    if kind == "replay":
        if not args.replay:
            raise _Usage("--engine replay needs --replay FILE")
        from sqale_desktop.core.engines.replay import ReplayEngine

        return ReplayEngine.from_file(Path(args.replay))
    if kind == "openai":
        if not args.base_url:
            raise _Usage("--engine openai needs --base-url URL")
        from sqale_desktop.core.engines.openai_http import OpenAIEngine

        return OpenAIEngine(args.base_url, api_key=_api_key(), model=args.server_model)
    if not args.model:
        record = _installed_model()
        if record is None:
            raise _Usage(
                "--engine llama needs --model GGUF_PATH, or an installed model "
                "(sqale-desktop models download / import); or use --base-url / --replay"
            )
        args.model = record.path
        if not args.model_dir:
            args.model_dir = str(record.model_dir)
    if not Path(args.model).is_file():
        raise _Usage(f"no model file at {args.model}")
    from sqale_desktop.core.engines.llama_cpp_engine import LlamaEngine

    return LlamaEngine(args.model, n_ctx=16384, n_gpu_layers="auto", n_threads=None)


def _api_key() -> str | None:
    """The server's API key: the environment first (scripts), then the keyring (the app's store)."""
    key = os.environ.get(API_KEY_ENV)
    if key:
        return key
    try:
        from sqale_desktop.core import secrets

        return secrets.get_secret(secrets.SERVER_API_KEY)
    except Exception:  # no keyring, a locked one, or none installed: run without a key
        return None


@contextmanager
def _stop_on_ctrl_c(control: EpisodeControl) -> Iterator[None]:
    """Ctrl-C stops the episode like the app's Stop button instead of killing the process."""

    def handler(signum: int, frame: FrameType | None) -> None:
        # Not control.cancel() here: the handler runs on the main thread, which may hold the
        # database's lock at this very moment; interrupting from another thread cannot deadlock.
        control.event.set()
        threading.Thread(target=control.cancel, name="ask-stop", daemon=True).start()

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread (tests calling main() from a worker): no handler
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _trace(event: Event, out: TextIO) -> None:
    if isinstance(event, TurnStarted):
        label = (
            "final turn" if event.final else f"turn {event.turn} ({event.tool_turns_left} tool turns left)"
        )
        out.write(f"\n── {label} ──\n")
    elif isinstance(event, TextDelta):
        out.write(event.text)
    elif isinstance(event, ToolCalled):
        out.write(f"\n→ {event.tool} {json.dumps(event.args, ensure_ascii=False)}\n")
    elif isinstance(event, ToolResulted):
        status = "ok" if event.ok else "error"
        out.write(f"← {event.tool} {status} ({event.seconds:.3f} s)\n")
        out.write("".join(f"  {line}\n" for line in event.output.splitlines() or [""]))
    elif isinstance(event, BudgetUpdated):
        out.write(f"{event.message}\n")
    elif isinstance(event, FinalAnswer):
        out.write(f"\n── answer: {event.ended_by} ──\n")
    out.flush()


def _summary(episode: Episode, out: TextIO) -> None:
    stats = episode.stats
    out.write(f"ended by: {episode.ended_by}\n")
    if episode.sql:
        out.write(f"sql: {episode.sql}\n")
    result = episode.result
    if result is not None:
        if result.error:
            out.write(f"error: {result.error}\n")
        else:
            out.write(" | ".join(result.columns) + "\n")
            for row in result.rows[:PRINTED_ROWS]:
                out.write(" | ".join("NULL" if v is None else str(_json_default(v)) for v in row) + "\n")
            more = result.truncated or len(result.rows) > PRINTED_ROWS
            out.write(f"({result.row_count} rows{', more not shown' if more else ''})\n")
    out.write(
        f"{len(episode.turns)} turns, {stats.completion_tokens} tokens generated, "
        f"{stats.prompt_tokens} in the prompt, {stats.seconds:.1f} s\n"
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<BLOB {len(bytes(value))} bytes>"
    if isinstance(value, str | int | float) or value is None:
        return value
    return str(value)
