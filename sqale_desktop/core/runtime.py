"""Settings + a model choice -> a ready engine factory, protocol and episode function.

The one home of "how a question becomes an episode": the window (``ui.app``) and the CLI
(``ask``, ``eval run``) both call :func:`resolve`, so the same settings give the same prompt, the
same sampling, the same context, GPU layers, threads, row cap and query time limit everywhere;
the CLI's flags only change the settings or the choice before they get here.

Nothing heavy happens here: llama_cpp is imported and the model loaded only when the factory runs
(on the window's agent thread, or in the CLI before its episode), and a broken registry means
"no model", never an exception.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqale_desktop.core.agent import protocol as protocol_files
from sqale_desktop.core.agent.events import Event
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.db.connection import ReadOnlyDatabase, open_readonly
from sqale_desktop.core.engines.base import Engine, SamplingParams
from sqale_desktop.core.settings import EngineName, Settings

log = logging.getLogger(__name__)

EngineFactory = Callable[[], Engine]
EpisodeFn = Callable[[Engine, Any, str, threading.Event], Iterator[Event]]
"""Runs one episode: (engine, the open tool database, question, cancel flag) -> events."""

LOAD_PROGRESS: contextvars.ContextVar[Callable[[float], None] | None] = contextvars.ContextVar(
    "LOAD_PROGRESS", default=None
)
"""Set while an engine factory runs (the window's agent thread sets it): a factory that can
report loading progress (fraction 0..1) calls it; factories that cannot simply ignore it."""


@dataclass(frozen=True)
class ModelChoice:
    """Which engine, when the settings' own choice is not wanted (the CLI's flags).

    ``None`` fields mean "what the settings say": the installed model of ``settings.model_id``
    for llama, ``settings.server_url`` for openai.  ``model_dir`` holds the model's
    ``sqale_agent.py`` and ``generation_config.json`` (default: the installed model's folder, or
    the GGUF's).  ``api_key`` ``None`` means the keyring's, read when the engine is built.
    """

    kind: EngineName
    model_path: Path | None = None
    model_dir: Path | None = None
    base_url: str | None = None
    server_model: str | None = None
    api_key: str | None = None
    replay: Path | None = None


@dataclass(frozen=True)
class Runtime:
    """What a question needs: an engine factory (``None``: no usable model), a line describing
    it, the protocol with the user's settings applied, and the episode function over them."""

    factory: EngineFactory | None
    description: str
    protocol: AgentProtocol
    episode: EpisodeFn
    settings: Settings
    model_path: Path | None = None
    model_dir: Path | None = None

    def open_database(self, path: Path) -> ReadOnlyDatabase:
        """The agent's own read-only handle, with the settings' query time limit."""
        return open_tool_database(path, self.settings.query_time_limit_s)


def resolve(settings: Settings, choice: ModelChoice | None = None) -> Runtime:
    """The runtime for ``settings`` (and ``choice``, default: the settings' engine); never raises
    for a missing or broken model (``factory`` is then ``None`` and ``description`` says so)."""
    choice = choice or ModelChoice(kind=settings.engine)
    factory: EngineFactory | None
    model_path: Path | None = None
    model_dir = choice.model_dir
    if choice.kind == "replay":
        factory, description = _replay_factory(choice.replay), "replay"
    elif choice.kind == "openai":
        url = choice.base_url or settings.server_url
        factory, description = _server_factory(url, choice.api_key, choice.server_model), f"server {url}"
    else:
        model_path, description = choice.model_path, ""
        if model_path is None:
            record = _installed(settings.model_id)
            if record is not None:
                model_path, description = Path(record.path), record.name
                model_dir = model_dir or Path(record.model_dir)
        elif model_dir is None:
            model_dir = model_path.parent
        if model_path is None:
            factory, description = None, "no model installed"
        else:
            factory = _local_factory(model_path, settings)
            description = f"{description or model_path.name} (not loaded yet)"
    # Looked up at call time, so a test (or a caller) that replaces load_protocol is heard.
    protocol = with_settings(protocol_files.load_protocol(model_dir), settings)
    return Runtime(
        factory, description, protocol, episode_fn(settings, protocol), settings, model_path, model_dir
    )


def with_settings(protocol: AgentProtocol, settings: Settings) -> AgentProtocol:
    """The user's sampling and context over the protocol's (which come from generation_config);
    ``sampling_source`` says "settings" where they differ, so a run records what was used."""
    sampling = SamplingParams(
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=settings.top_k,
        min_p=settings.min_p,
        repeat_penalty=protocol.sampling.repeat_penalty,
        seed=protocol.sampling.seed,
    )
    source = protocol.sampling_source if sampling == protocol.sampling else "settings"
    return dataclasses.replace(
        protocol, sampling=sampling, sampling_source=source, context_tokens=settings.n_ctx
    )


def episode_fn(settings: Settings, protocol: AgentProtocol | None = None) -> EpisodeFn:
    """The real episode: ``core.agent.loop.run_episode`` with a ``ToolBox`` over the database.

    ``protocol`` ``None`` uses the built-in one.  The settings cap the answer's rows; the model
    sees as many rows as in training.
    """
    from sqale_desktop.core.agent.loop import run_episode
    from sqale_desktop.core.tools import ToolBox

    def run(engine: Engine, db: Any, question: str, cancel: threading.Event) -> Iterator[Event]:
        chosen = fit_protocol(protocol, getattr(engine, "n_ctx", None))
        yield from run_episode(
            question, db, ToolBox(db), engine, chosen, cancel=cancel, result_rows=settings.max_rows
        )

    return run


def fit_protocol(protocol: AgentProtocol | None, n_ctx: object) -> AgentProtocol | None:
    """The protocol's budgets within the engine's context (clamped to the model's training context).

    The episode keeps the protocol's proportion (12,288 of 16,384 tokens: three quarters for the
    episode, the rest for the final answer), so a smaller context still ends in a final turn
    instead of an overflow.
    """
    if not isinstance(n_ctx, int) or n_ctx <= 0:
        return protocol
    base = protocol if protocol is not None else AgentProtocol()
    if n_ctx >= base.context_tokens:
        return protocol
    return dataclasses.replace(
        base, context_tokens=n_ctx, episode_tokens=min(base.episode_tokens, n_ctx * 3 // 4)
    )


def open_tool_database(path: Path, time_limit_s: float) -> ReadOnlyDatabase:
    """The agent's own handle on a database (opened on the thread that runs the episode)."""
    return open_readonly(path, time_limit_s=time_limit_s)


def _installed(model_id: str) -> Any:
    try:
        from sqale_desktop.core.models.registry import Registry

        return Registry().usable(model_id)
    except Exception as exc:  # a corrupt registry: the model manager shows it; here, no model
        log.warning("model registry unreadable: %s", exc)
        return None


def _local_factory(path: Path, settings: Settings) -> EngineFactory:
    n_ctx, threads, layers = settings.n_ctx, settings.n_threads, settings.gpu_layers
    speculation = settings.speculation

    def local() -> Engine:
        from sqale_desktop.core.engines.llama.engine import LlamaEngine
        from sqale_desktop.core.models.gguf_info import GgufUnreadable, effective_n_ctx, read_gguf_info

        try:
            info = read_gguf_info(path)
        except GgufUnreadable:
            info = None  # the engine's own load reports what is wrong with the file
        # Never more context than the model was trained for (the window says so when it clamps).
        engine = LlamaEngine(
            path,
            n_ctx=effective_n_ctx(info, n_ctx),
            n_gpu_layers=layers,
            n_threads=threads or None,
            speculation=speculation,
        )
        engine.load(progress=LOAD_PROGRESS.get())
        loaded: Engine = engine
        return loaded

    return local


def _server_factory(url: str, api_key: str | None, model: str | None) -> EngineFactory:
    def server() -> Engine:
        from sqale_desktop.core import secrets
        from sqale_desktop.core.engines.openai_http import OpenAIEngine

        key = api_key if api_key is not None else secrets.get_secret(secrets.SERVER_API_KEY)
        engine: Engine = OpenAIEngine(url, api_key=key, model=model)
        return engine

    return server


def _replay_factory(path: Path | None) -> EngineFactory | None:
    if path is None:
        return None
    script = path

    def replay() -> Engine:
        from sqale_desktop.core.engines.replay import ReplayEngine

        engine: Engine = ReplayEngine.from_file(script)
        return engine

    return replay
