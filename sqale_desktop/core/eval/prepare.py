"""An evaluation run made ready in one call: its runtime chosen, its questions read, its engines
opened and its ``run.json`` written, so that ``eval run`` only turns flags into a
:class:`RunRequest` and prints what the run yields.

A question set is asked question by question under a schema condition (``gold``,
``distractors:K``, ``full``); a conversational set (SParC / CoSQL layout) interaction by
interaction under one or more follow-up conditions (``standalone``, ``continued``, ``carried``),
on the full schema.  ``--resume`` checks that the run folder was made by the same settings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.eval.conditions import ConditionError, parse_condition
from sqale_desktop.core.eval.conversations import (
    FollowUps,
    Interaction,
    load_conversations,
    parse_follow_ups,
    turn_keys,
)
from sqale_desktop.core.eval.harness import RUN_FILE, EvalRun, RunFileError, RunOptions, read_run_json
from sqale_desktop.core.eval.metrics import Metric
from sqale_desktop.core.eval.question_types import EvalQuestion, Format, select
from sqale_desktop.core.eval.records import EpisodeRecord, finished_keys
from sqale_desktop.core.runtime import ChoiceError, EngineFlags, Runtime, choose
from sqale_desktop.core.settings import Settings

# run.json's settings that a resumed run must share with the run it continues
_RESUME_SAME = ("questions", "condition", "follow_ups", "metric", "seed", "phrasing")


class RunUsageError(KnownError):
    """Options that cannot work together (a command's bad usage); the message says which."""


@dataclass(frozen=True)
class RunRequest:
    """What ``eval run`` was asked for, as given (``None``: not given).

    ``follow_ups``: the follow-up conditions of a conversational set, comma-separated (default
    ``continued``, how the window asks them); ``databases``: the folder a conversational set's
    database paths are relative to (default: the set's folder); ``base_urls``: every server of an
    ``openai`` run; ``model``: the GGUF file (``run.json`` records it); ``parameters``: the
    model's parameter count for the TFLOPs estimate.
    """

    questions: str
    format: Format | None = None
    phrasing: str = "evidence_supported"
    schemas: str | None = None
    split: str = "test"
    condition: str = "full"
    follow_ups: str | None = None
    databases: Path | None = None
    metric: Metric = "sqale"
    seed: int = 0
    limit: int | None = None
    sample: int | None = None
    concurrency: int = 1
    time_limit_s: float = 30.0
    parameters: float | None = None
    out: Path | None = None
    resume: Path | None = None
    base_urls: Sequence[str] = ()
    replay: str | None = None
    model: Path | None = None


@dataclass
class PreparedRun:
    """A run ready to go: its folder, the runtime, and what it asks (questions, or interactions
    and their follow-up conditions); ``total`` and ``todo`` count episodes (turns, for a
    conversational set), all of them and those a resumed run still has to run."""

    run_dir: Path
    runtime: Runtime
    run: EvalRun
    questions: list[EvalQuestion] = field(default_factory=list)
    interactions: list[Interaction] = field(default_factory=list)
    follow_ups: list[FollowUps] = field(default_factory=list)
    total: int = 0
    todo: int = 0

    def records(self) -> Iterator[EpisodeRecord]:
        """Run what is not finished yet; each record is yielded once it is saved."""
        if self.follow_ups:
            return self.run.run_conversations(self.interactions, self.follow_ups)
        return self.run.run(self.questions)


def prepare_run(
    request: RunRequest,
    settings: Settings,
    flags: EngineFlags,
    stack: ExitStack,
    *,
    cache: Path,
    note: Callable[[str], None],
) -> PreparedRun:
    """Choose the runtime, read the questions, open the engines (``stack`` closes them) and write
    ``run.json``; ``note`` hears what was skipped or adjusted, as it happens.

    Raises :class:`RunUsageError` for options that cannot work together, another
    :class:`~sqale_desktop.core.errors.KnownError` for a set, scripts or model that cannot be read.
    """
    from sqale_desktop.core.eval.engines import open_engines

    try:
        condition = parse_condition(request.condition)
        if request.concurrency < 1:
            raise RunUsageError("--concurrency must be at least 1")
        if request.out and request.resume and request.out != request.resume:
            raise RunUsageError("give --out or --resume, not both")
        runtime = choose(settings, flags)
    except (ConditionError, ChoiceError) as exc:
        raise RunUsageError(str(exc)) from None
    asked = _read_set(request, condition.label, note)
    run_dir = _run_dir(request)
    concurrency = request.concurrency
    if not runtime.concurrent and concurrency > 1:
        note(f"the in-process {runtime.kind} engine runs one episode at a time")
        concurrency = 1
    engines = open_engines(
        runtime, stack, base_urls=request.base_urls, replay=request.replay,
        model=request.model, parameters=request.parameters,
    )  # fmt: skip
    _write_run_json(run_dir, request, asked.settings, concurrency, engines.facts, engines.protocol)
    options = RunOptions(
        metric=request.metric,
        condition=condition,
        seed=request.seed,
        concurrency=concurrency,
        time_limit_s=request.time_limit_s,
        parameters=engines.facts.get("parameters"),
    )
    run = EvalRun(run_dir, engines.engine_for, runtime.episode, runtime.open_database, options, cache=cache)
    prepared = PreparedRun(run_dir, runtime, run, asked.questions, asked.interactions, asked.follow_ups)
    prepared.total, prepared.todo = asked.counts(condition.label, finished_keys(run_dir))
    return prepared


@dataclass
class _Asked:
    """What a run asks, and what ``run.json`` says about it."""

    settings: dict[str, Any]
    questions: list[EvalQuestion] = field(default_factory=list)
    interactions: list[Interaction] = field(default_factory=list)
    follow_ups: list[FollowUps] = field(default_factory=list)

    def counts(self, condition: str, done: set[tuple[str, str]]) -> tuple[int, int]:
        """The episodes the run asks, and those still to run (an interaction not finished is
        asked again whole)."""
        if not self.follow_ups:
            return len(self.questions), sum((condition, q.key) not in done for q in self.questions)
        units = [[(c, key) for key in turn_keys(i)] for c in self.follow_ups for i in self.interactions]
        todo = sum(len(keys) for keys in units if not all(key in done for key in keys))
        return sum(len(keys) for keys in units), todo


def _read_set(request: RunRequest, condition: str, note: Callable[[str], None]) -> _Asked:
    from sqale_desktop.core.eval.questions import detect_format, load_question_set, question_file

    path = Path(request.questions).expanduser()
    fmt = request.format or (detect_format(path) if path.exists() else None)
    if fmt != "sparc":
        if request.follow_ups is not None or request.databases is not None:
            raise RunUsageError("--follow-ups and --databases are for conversational sets (SParC/CoSQL)")
        qset = load_question_set(
            request.questions, fmt, phrasing=request.phrasing, schemas=request.schemas, split=request.split
        )
        for line in qset.notes:
            note(line)
        qset.select(limit=request.limit, sample=request.sample, seed=request.seed)
        settings = {
            "questions": _source(qset.source),
            "format": qset.format,
            "phrasing": qset.phrasing,
            "question_count": len(qset.questions),
            "notes": qset.notes,
            "condition": condition,
            "metric": request.metric,
            "seed": request.seed,
            "limit": request.limit,
            "sample": request.sample,
        }
        return _Asked(settings, questions=qset.questions)
    if condition != "full":
        raise RunUsageError(
            "a conversational set runs on the full schema (its turns share one database): "
            "--condition gold or distractors does not apply; --follow-ups chooses its condition"
        )
    try:
        follow_ups = parse_follow_ups(request.follow_ups or "continued")
    except ValueError as exc:
        raise RunUsageError(f"--follow-ups: {exc}") from None
    source = question_file(path)
    interactions, notes = load_conversations(source, request.databases)
    for line in notes:
        note(line)
    interactions = select(interactions, limit=request.limit, sample=request.sample, seed=request.seed)
    settings = {
        "questions": _source(str(source)),
        "format": "sparc",
        "phrasing": None,
        "question_count": sum(len(i.turns) for i in interactions),
        "interactions": len(interactions),
        "notes": notes,
        "condition": condition,
        "follow_ups": list(follow_ups),
        "databases": str(request.databases.resolve()) if request.databases else None,
        "metric": request.metric,
        "seed": request.seed,
        "limit": request.limit,
        "sample": request.sample,
    }
    return _Asked(settings, interactions=interactions, follow_ups=follow_ups)


def _source(source: str) -> str:
    return str(Path(source).resolve()) if Path(source).exists() else source


def _run_dir(request: RunRequest) -> Path:
    if request.resume:
        if not (request.resume / RUN_FILE).is_file():
            raise RunUsageError(f"{request.resume} is not a run folder (no {RUN_FILE})")
        return request.resume
    if request.out:
        if (request.out / "episodes.jsonl").exists():
            raise RunUsageError(
                f"{request.out} already holds a run: use --resume {request.out} to continue it"
            )
        return request.out
    from sqale_desktop.core.eval.run_settings import now

    return Path(f"sqale-eval-{now().replace(':', '').replace('+0000', 'Z')}")


def _write_run_json(
    run_dir: Path,
    request: RunRequest,
    settings: dict[str, Any],
    concurrency: int,
    engine: dict[str, Any],
    protocol: Any,
) -> None:
    from sqale_desktop import __version__
    from sqale_desktop.core.eval.run_settings import machine, now, protocol_facts

    path = run_dir / RUN_FILE
    if request.resume:
        try:
            old = read_run_json(run_dir)
        except RunFileError as exc:
            raise RunUsageError(str(exc)) from None
        for key in _RESUME_SAME:
            if old.get("settings", {}).get(key) != settings.get(key):
                raise RunUsageError(
                    f"--resume {run_dir}: the run used {key} {old.get('settings', {}).get(key)!r}, "
                    f"not {settings.get(key)!r}"
                )
        old.setdefault("resumed", []).append(now())
        path.write_text(json.dumps(old, indent=2, ensure_ascii=False), encoding="utf-8")
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    document = {
        "app_version": __version__,
        "started": now(),
        "settings": settings,
        "engine": engine,
        "concurrency": concurrency,
        "protocol": protocol_facts(protocol),
        "machine": machine(),
    }
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
