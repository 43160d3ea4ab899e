"""The engines of an evaluation run, from the runtime the command chose: one in-process model,
several servers in turn, or a replay script per question.

The command only turns flags into settings and an engine choice (``core.runtime.choose``); how a
run spreads its questions over that choice's engines, and what ``run.json`` records about them,
is decided here.  Every engine built is closed when the run's ``ExitStack`` closes.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.eval.harness import EngineFor
from sqale_desktop.core.eval.run_settings import gguf_facts
from sqale_desktop.core.runtime import Runtime, close_engine, resolve

GOLD = "gold"
"""The replay "file" that submits each question's gold query (a self-check of the harness)."""


@dataclass(frozen=True)
class RunEngines:
    """Each question's engine, what ``run.json`` says about the engines, and the protocol in
    force (the runtime's, fitted to the engine's context as every episode's is)."""

    engine_for: EngineFor
    facts: dict[str, Any]
    protocol: AgentProtocol


def open_engines(
    runtime: Runtime,
    stack: ExitStack,
    *,
    base_urls: Sequence[str] = (),
    replay: str | None = None,
    model: Path | None = None,
    parameters: float | None = None,
) -> RunEngines:
    """Build the run's engines (the model is loaded here); ``stack`` closes them after the run.

    ``base_urls``: every server of an ``openai`` run (the first is the runtime's own); ``replay``:
    the scripts file, or :data:`GOLD`; ``model``: the weights a server runs, for ``run.json``;
    ``parameters``: the model's parameter count when given (else read from the GGUF).
    Raises a known error for scripts or a model that cannot be read.
    """
    facts: dict[str, Any] = {"kind": runtime.kind, "parameters": parameters}
    if runtime.kind_facts.per_question:
        from sqale_desktop.core.eval.replay import gold_script, load_scripts, replay_engine_for

        facts["replay"] = replay
        scripts: Any = gold_script if replay in (None, GOLD) else load_scripts(Path(replay))
        return RunEngines(replay_engine_for(scripts), facts, runtime.protocol)
    if runtime.kind_facts.server:
        others = [dataclasses.replace(runtime.choice, base_url=url) for url in base_urls[1:]]
        runtimes = [runtime] + [resolve(runtime.settings, choice) for choice in others]
        built = [r.factory() for r in runtimes if r.factory is not None]
        for engine in built:
            stack.callback(close_engine, engine)
        facts["base_urls"] = [getattr(e, "base_url", None) for e in built]
        facts["server_model"] = getattr(built[0], "model", None)
        if model is not None:
            facts["model"] = gguf_facts(model)
        protocol = runtime.protocol_for(built[0])
        return RunEngines(lambda question, index: built[index % len(built)], facts, protocol)
    if runtime.factory is None or runtime.model_path is None:
        raise ValueError(f"the {runtime.kind} runtime has no model: {runtime.description}")
    facts["model"] = gguf_facts(runtime.model_path)
    facts["parameters"] = parameters or facts["model"].get("parameters")
    engine = runtime.factory()
    stack.callback(close_engine, engine)
    facts["n_ctx"] = getattr(engine, "n_ctx", runtime.settings.n_ctx)  # clamped to the model's training
    # Where it runs: backend, CPU variant, device ("local CPU (zen4: AVX-512 ...; no GPU found)").
    facts["runs_on"] = engine.describe()
    # The system turn, restored from an earlier run's saved state or evaluated once, before the
    # first question (each later episode restores it from memory).
    warmed = runtime.warm_up(engine, threading.Event())
    if warmed is not None:
        facts["system_turn"] = {"tokens": warmed.tokens, "restored": warmed.restored}
    return RunEngines(lambda question, index: engine, facts, runtime.protocol_for(engine))
