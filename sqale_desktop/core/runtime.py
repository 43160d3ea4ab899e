"""Settings + a model choice -> a ready engine factory, protocol and episode function.

The one home of "how a question becomes an episode": the window (``ui.app``) and the CLI
(``ask``, ``eval run``) both call :func:`resolve`, so the same settings give the same prompt, the
same sampling, the same context, GPU layers, threads, row cap and query time limit everywhere;
the CLI's flags only change the settings, and :func:`choose` turns its engine flags into a choice.
How each kind of engine is built is decided once, in the :data:`ENGINES` table of builders, and
what each kind means once, in ``core.engine_kinds`` (:attr:`Runtime.kind_facts`); the recorded demo
episode is one of them ("recording"), so the window plays it like any other engine.  The faces
(``ui``, ``commands``) never import ``core.engines``: what they need of an engine is here.  The
window's agent thread keeps one :class:`Runtime` (its engine factory, episode, tool-database
opener and warm-up) and is handed a new one when the settings change.

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
from typing import Any, Protocol

from sqale_desktop.core.agent import protocol as protocol_files
from sqale_desktop.core.agent.chat_template import assistant_opener
from sqale_desktop.core.agent.events import Event
from sqale_desktop.core.agent.followup import Thread as Thread  # re-exported: the faces build threads here
from sqale_desktop.core.agent.followup import prefetch_follow_up
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.db.connection import ReadOnlyDatabase, open_readonly

# re-exported: the kinds the commands accept
from sqale_desktop.core.engine_kinds import COMMAND_ENGINES as COMMAND_ENGINES
from sqale_desktop.core.engine_kinds import KINDS, LLAMA, RECORDING, REPLAY, SERVER, EngineKind, Kind
from sqale_desktop.core.engines.base import Engine as Engine  # re-exported: the faces type engines here
from sqale_desktop.core.engines.base import SamplingParams, WarmUp
from sqale_desktop.core.engines.llama.gpu import GpuOffload as GpuOffload  # re-exported for the faces
from sqale_desktop.core.engines.llama.gpu import gpu_offload as gpu_offload
from sqale_desktop.core.engines.llama.gpu import known_gpus as known_gpus
from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.settings import Settings

log = logging.getLogger(__name__)

EngineFactory = Callable[[], Engine]


class EpisodeFn(Protocol):
    """Runs one episode: (engine, the open tool database, question, cancel flag) -> events.

    ``parent``: the thread of a finished episode that this question follows up
    (``core.agent.followup``); without it the episode is the trained standalone one.
    """

    def __call__(
        self, engine: Engine, db: Any, question: str, cancel: threading.Event, parent: Thread | None = None
    ) -> Iterator[Event]: ...


LOAD_PROGRESS: contextvars.ContextVar[Callable[[float], None] | None] = contextvars.ContextVar(
    "LOAD_PROGRESS", default=None
)
"""Set while an engine factory runs (the window's agent thread sets it): a factory that can
report loading progress (fraction 0..1) calls it; factories that cannot simply ignore it."""


class NoModelInstalled(KnownError):
    """The window was asked a question while no usable model is installed."""


class ChoiceError(KnownError):
    """A command's engine flags name no usable engine; the message says which flag is missing."""


@dataclass(frozen=True)
class ModelChoice:
    """Which engine, when the settings' own choice is not wanted (the CLI's flags, the recording).

    ``None`` fields mean "what the settings say": the installed model of ``settings.model_id``
    for llama, ``settings.server_url`` for openai.  ``model_dir`` holds the model's
    ``sqale_agent.py`` and ``generation_config.json`` (default: the installed model's folder, or
    the GGUF's).  ``api_key`` ``None`` means the keyring's, read when the engine is built.
    ``replay``: a file of completions (replay); ``completions`` and ``delay``: the recording's
    completions and the pause between its streamed chunks.
    """

    kind: EngineKind
    model_path: Path | None = None
    model_dir: Path | None = None
    base_url: str | None = None
    server_model: str | None = None
    api_key: str | None = None
    replay: Path | None = None
    completions: tuple[str, ...] = ()
    delay: float = 0.0


@dataclass(frozen=True)
class EngineFlags:
    """A command's engine flags as given (``None``: not given); :func:`choose` decides from them.

    ``api_key`` reads the server's key (the environment, then the keyring); it is called only when
    the engine is a server, so no other engine touches the keyring.
    """

    engine: str | None = None
    model: Path | None = None
    model_dir: Path | None = None
    base_url: str | None = None
    server_model: str | None = None
    api_key: Callable[[], str | None] | None = None
    replay: Path | None = None


@dataclass(frozen=True)
class Built:
    """What an engine builder decided: the factory (``None``: no usable engine), a line describing
    it, the model's files, and whether one engine may run several episodes at once."""

    factory: EngineFactory | None
    description: str
    model_path: Path | None = None
    model_dir: Path | None = None
    concurrent: bool = True


EngineBuilder = Callable[[Settings, ModelChoice], Built]


@dataclass(frozen=True)
class Runtime:
    """What a question needs: an engine factory (``None``: no usable model), a line describing
    it, the protocol with the user's settings applied, and the episode function over them."""

    factory: EngineFactory | None
    description: str
    protocol: AgentProtocol
    episode: EpisodeFn
    settings: Settings
    choice: ModelChoice
    model_path: Path | None = None
    model_dir: Path | None = None
    concurrent: bool = True
    """False for the in-process llama engine: one episode at a time (it is not thread-safe)."""

    @property
    def kind(self) -> EngineKind:
        return self.choice.kind

    @property
    def kind_facts(self) -> Kind:
        """What this runtime's kind of engine means (``core.engine_kinds``)."""
        return KINDS[self.kind]

    @property
    def thread_model(self) -> str:
        """Which model writes this runtime's threads, as the history records it: a follow-up is
        continued only by the model that wrote its thread (another one never saw those turns)."""
        if self.model_path is not None:
            return f"{self.kind}: {self.model_path.name}"
        if self.kind_facts.server:
            url = self.choice.base_url or self.settings.server_url
            return f"{self.kind}: {url} {self.choice.server_model or ''}".rstrip()
        return self.kind

    def open_database(self, path: Path) -> ReadOnlyDatabase:
        """The agent's own read-only handle, with the settings' query time limit."""
        return open_tool_database(path, self.settings.query_time_limit_s)

    def protocol_for(self, engine: Engine) -> AgentProtocol:
        """The protocol an episode on ``engine`` runs with: its budgets fitted to the engine's
        context (what :class:`~sqale_desktop.core.agent.events.EpisodeStarted` reports)."""
        return fit_protocol(self.protocol, getattr(engine, "n_ctx", None)) or self.protocol

    def retune(self, settings: Settings) -> Runtime:
        """This runtime under new settings that do not choose its engine (sampling, limits, rows):
        the protocol and the episode follow them, the engine factory and the model stay, so the
        window keeps a loaded model."""
        protocol = settings_protocol(self.model_dir, settings)
        return dataclasses.replace(
            self, protocol=protocol, episode=episode_fn(settings, protocol), settings=settings
        )

    def warms(self, engine: Engine) -> bool:
        """Whether :meth:`warm_up` has anything to do on ``engine`` (a local model; not a server,
        not a replay), so the window says "Preparing the model…" only when it does."""
        return callable(getattr(engine, "warm_up", None))

    def prefetch_follow_up(self, engine: Engine, thread: Thread, cancel: threading.Event) -> int:
        """Have ``engine`` evaluate, while the person types, what a follow-up to ``thread`` starts
        with (``core.agent.followup.prefetch_follow_up``), with the protocol and opener an episode
        on ``engine`` uses; the tokens evaluated (0, touching nothing, where the engine keeps no
        state: a server, a replay)."""
        if not callable(getattr(engine, "prefetch_continuation", None)):
            return 0
        protocol = self.protocol_for(engine)
        opener = protocol.assistant_opener or assistant_opener(engine.chat_template())
        return prefetch_follow_up(engine, protocol, opener, thread, cancel)

    def warm_up(self, engine: Engine, cancel: threading.Event) -> WarmUp | None:
        """Have the system turn every episode on ``engine`` starts with ready before the first
        question: restored from the state an earlier launch saved, or evaluated and saved
        (``base.WarmsUp``).  ``ask`` and ``eval run`` call it before their first episode, so a
        second ``ask`` does not evaluate the system turn again; the window's agent thread calls
        it right after loading.  None for engines with nothing to warm (a server, a replay).
        ``cancel`` stops it between prefill chunks.
        """
        warm = getattr(engine, "warm_up", None)
        if not callable(warm):
            return None
        try:
            result: WarmUp = warm(self.protocol_for(engine).prompt_head(""), cancel)
        except KnownError as exc:
            # Only time is at stake: the first episode evaluates the turn itself, and reports
            # what is wrong (a context too small for the system prompt) in its own words.
            log.warning("system-turn warm-up failed: %s", exc)
            return None
        return result


def resolve(settings: Settings, choice: ModelChoice | None = None) -> Runtime:
    """The runtime for ``settings`` (and ``choice``, default: the settings' engine); never raises
    for a missing or broken model (``factory`` is then ``None`` and ``description`` says so)."""
    choice = choice or ModelChoice(kind=settings.engine)
    built = ENGINES[choice.kind](settings, choice)
    protocol = settings_protocol(built.model_dir, settings)
    return Runtime(
        built.factory,
        built.description,
        protocol,
        episode_fn(settings, protocol),
        settings,
        choice,
        built.model_path,
        built.model_dir,
        built.concurrent,
    )


def choose(settings: Settings, flags: EngineFlags) -> Runtime:
    """The runtime a command's flags ask for, over the settings; the one place that decides.

    The engine is the one named, else the one the flags imply (``--replay``, ``--base-url``), else
    the settings' own, as in the window.  Raises :class:`ChoiceError` for flags that cannot work.
    """
    named = flags.engine or (REPLAY if flags.replay else SERVER if flags.base_url else settings.engine)
    kind = next((known for known in COMMAND_ENGINES if known == named), None)
    if kind is None:
        raise ChoiceError(f"unknown engine {named!r} (one of {', '.join(COMMAND_ENGINES)})")
    facts = KINDS[kind]
    if kind == REPLAY and flags.replay is None:
        raise ChoiceError(f"--engine {kind} needs --replay FILE")
    if facts.needs_url and not flags.base_url and settings.engine != kind:
        raise ChoiceError(f"--engine {kind} needs --base-url URL (or a server chosen in the settings)")
    if facts.model_file and flags.model is not None and not flags.model.is_file():
        raise ChoiceError(f"no model file at {flags.model}")
    choice = ModelChoice(
        kind,
        model_path=flags.model if facts.model_file else None,
        model_dir=flags.model_dir,
        base_url=flags.base_url,
        server_model=flags.server_model,
        api_key=flags.api_key() if facts.server and flags.api_key is not None else None,
        replay=flags.replay,
    )
    runtime = resolve(settings, choice)
    if runtime.factory is None and facts.model_file:
        raise ChoiceError(
            f"--engine {kind} needs --model GGUF_PATH, or an installed model "
            "(sqale-desktop models download / import); or use --base-url / --replay"
        )
    return runtime


def close_engine(engine: Engine) -> None:
    """Free what an engine holds (the llama model's memory); engines with nothing to free pass."""
    close = getattr(engine, "close", None)
    if callable(close):
        close()


def settings_protocol(model_dir: Path | None, settings: Settings) -> AgentProtocol:
    """The protocol of the model in ``model_dir`` (the built-in one without it), with the user's
    sampling and context (:func:`with_settings`)."""
    # Looked up at call time, so a test (or a caller) that replaces load_protocol is heard.
    return with_settings(protocol_files.load_protocol(model_dir), settings)


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

    ``protocol`` ``None`` uses the built-in one; a follow-up (``parent``) runs through this same
    function, so the window, ``ask --follow-up`` and the evaluation build it alike.  The settings
    cap the answer's rows and set the turn's tool budget; the model sees as many rows as in
    training.
    """
    from sqale_desktop.core.agent.loop import run_episode
    from sqale_desktop.core.tools import ToolBox

    def run(
        engine: Engine, db: Any, question: str, cancel: threading.Event, parent: Thread | None = None
    ) -> Iterator[Event]:
        chosen = fit_protocol(protocol, getattr(engine, "n_ctx", None))
        yield from run_episode(
            question,
            db,
            ToolBox(db),
            engine,
            chosen,
            cancel=cancel,
            result_rows=settings.max_rows,
            turn_tool_seconds=settings.turn_tool_time_s,
            parent=parent,
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


def _llama(settings: Settings, choice: ModelChoice) -> Built:
    model_path, model_dir, description, sha256 = choice.model_path, choice.model_dir, "", ""
    if model_path is None:
        record = _installed(settings.model_id)
        if record is not None:
            model_path, description, sha256 = Path(record.path), record.name, record.sha256
            model_dir = model_dir or Path(record.model_dir)
    elif model_dir is None:
        model_dir = model_path.parent
    if model_path is None:
        return Built(None, "no model installed", None, model_dir, concurrent=False)
    factory = _local_factory(model_path, settings, sha256)
    description = f"{description or model_path.name} (not loaded yet)"
    return Built(factory, description, model_path, model_dir, concurrent=False)


def _local_factory(path: Path, settings: Settings, sha256: str = "") -> EngineFactory:
    """Builds and loads the llama engine; ``sha256`` is the registry's hash of the file (its saved
    states' key, so the engine need not read the file to compute it)."""
    n_ctx, threads, layers = settings.n_ctx, settings.n_threads, settings.gpu_layers
    speculation, gpu_device = settings.speculation, settings.gpu_device

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
            gpu_device=gpu_device,
            n_threads=threads or None,
            speculation=speculation,
            model_sha256=sha256,
        )
        engine.load(progress=LOAD_PROGRESS.get())
        loaded: Engine = engine
        return loaded

    return local


def _server(settings: Settings, choice: ModelChoice) -> Built:
    url = choice.base_url or settings.server_url
    api_key = choice.api_key
    # the settings' model id goes with the settings' server only, not with a --base-url of its own
    model = choice.server_model or (settings.server_model if not choice.base_url else "") or None
    prices = settings.prices()

    def server() -> Engine:
        from sqale_desktop.core import secrets
        from sqale_desktop.core.engines.openai_http import OpenAIEngine

        key = api_key if api_key is not None else secrets.get_secret(secrets.SERVER_API_KEY)
        engine: Engine = OpenAIEngine(url, api_key=key, model=model, prices=prices)
        return engine

    return Built(server, f"server {url}", model_dir=choice.model_dir)


def _replay(settings: Settings, choice: ModelChoice) -> Built:
    script = choice.replay
    if script is None:
        return Built(None, REPLAY, model_dir=choice.model_dir)

    def replay() -> Engine:
        from sqale_desktop.core.engines.replay import ReplayEngine

        engine: Engine = ReplayEngine.from_file(script)
        return engine

    return Built(replay, REPLAY, model_dir=choice.model_dir)


RECORDED_ENGINE = "recorded demo episode"
"""What the recording's engine calls itself (an episode's ``stats.engine``): the window keeps a
played recording in its conversation and knows a restored one for a recording by it."""


def _recording(settings: Settings, choice: ModelChoice) -> Built:
    """The recorded demo episode: its completions streamed in chunks of 8 characters, ``delay``
    seconds apart (read at a human pace), while every tool call runs on the database now."""
    completions, delay = list(choice.completions), choice.delay

    def recording() -> Engine:
        from sqale_desktop.core.engines.replay import ReplayEngine

        class RecordedEngine(ReplayEngine):
            def describe(self) -> str:
                return RECORDED_ENGINE

        engine: Engine = RecordedEngine(completions, chunk_chars=8, delay=delay)
        return engine

    return Built(recording, RECORDING, model_dir=choice.model_dir)


ENGINES: dict[EngineKind, EngineBuilder] = {
    LLAMA: _llama,
    SERVER: _server,
    REPLAY: _replay,
    RECORDING: _recording,
}
"""The one table of engine builders, by kind (simonw/llm's registry): :func:`resolve` looks the
builder up here; what a kind means is ``core.engine_kinds``' table, and nobody compares kind names."""
