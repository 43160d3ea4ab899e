"""Which engine the settings ask for, as a factory the agent thread calls (the model loads there).

Nothing heavy happens here: llama_cpp is imported and the model loaded only when the factory runs,
on the agent thread.  Without an installed model there is no factory, and the window says so.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Literal

from sqale_desktop.core.agent.protocol import AgentProtocol, load_protocol
from sqale_desktop.core.engines.base import Engine, SamplingParams
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.agent_runner import LOAD_PROGRESS, EngineFactory

log = logging.getLogger(__name__)


@dataclass
class EngineChoice:
    """A factory (``None`` when no model is usable), a line for the status bar, the protocol."""

    factory: EngineFactory | None
    description: str
    protocol: AgentProtocol


def _sampling(settings: Settings, protocol: AgentProtocol) -> AgentProtocol:
    """The user's sampling settings over the protocol's (which come from generation_config)."""
    sampling = SamplingParams(
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=settings.top_k,
        min_p=settings.min_p,
        repeat_penalty=protocol.sampling.repeat_penalty,
        seed=protocol.sampling.seed,
    )
    return dataclasses.replace(protocol, sampling=sampling, context_tokens=settings.n_ctx)


def engine_choice(settings: Settings) -> EngineChoice:
    """Build the choice for ``settings``; never raises (a broken registry means "no model")."""
    if settings.engine == "openai":
        from sqale_desktop.core import secrets

        url = settings.server_url

        def server() -> Engine:
            from sqale_desktop.core.engines.openai_http import OpenAIEngine

            engine: Engine = OpenAIEngine(url, api_key=secrets.get_secret(secrets.SERVER_API_KEY))
            return engine

        return EngineChoice(server, f"server {url}", _sampling(settings, AgentProtocol()))
    try:
        from sqale_desktop.core.models.registry import Registry

        record = Registry().usable(settings.model_id)
    except Exception as exc:  # a corrupt registry: the model manager shows it; here, no model
        log.warning("model registry unreadable: %s", exc)
        record = None
    if record is None:
        return EngineChoice(None, "no model installed", _sampling(settings, AgentProtocol()))
    protocol = load_protocol(record.model_dir)
    path, n_ctx, threads, speculation = record.path, settings.n_ctx, settings.n_threads, settings.speculation
    layers: int | Literal["auto", "all"] = 0 if settings.gpu_layers == "none" else settings.gpu_layers

    def local() -> Engine:
        from sqale_desktop.core.engines.llama_cpp_engine import LlamaEngine
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
        engine.load(progress=LOAD_PROGRESS.get())  # on the agent thread; the status bar shows it
        loaded: Engine = engine
        return loaded

    return EngineChoice(local, f"{record.name} (not loaded yet)", _sampling(settings, protocol))
