"""``EvalRun``: real agent episodes over a question set, each scored and saved as it finishes.

The run folder holds ``run.json`` (the settings that produced the run) and ``episodes.jsonl``, one
line per finished episode, appended and flushed as soon as the episode is scored, so an
interrupted run loses nothing and ``resume`` continues where it stopped: a question whose last
line is a finished episode is not run again (an episode that ended in an engine or database
error is run again; its old line stays for the record, and readers take the last line per id).

Episodes run on a thread pool (``concurrency``) so that a serving cluster (``--engine openai``)
works on many at once while this process only executes tools; the in-process llama engine must be
given ``concurrency=1``.  ``cancel()`` (Ctrl+C) stops every running episode the way the app's Stop
button does (the shared flag plus a database interrupt); a cancelled episode is not recorded.

A run whose server cannot be reached stops: after ``UNREACHABLE_LIMIT`` episodes in a row end
because no server answered (refused, unknown host, no connection in time), ``run`` raises
:class:`ServerUnreachable` instead of writing an error line for every question in seconds.

What each line holds is documented on :func:`episode_record`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqale_desktop.core import json_input
from sqale_desktop.core.agent.events import Episode, EpisodeEnded
from sqale_desktop.core.engines.base import Engine, EngineError
from sqale_desktop.core.engines.openai_http import UNREACHABLE
from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.eval import sql_facts
from sqale_desktop.core.eval.conditions import Condition, ConditionError, prepare_database
from sqale_desktop.core.eval.metrics import Metric
from sqale_desktop.core.eval.questions import EvalQuestion
from sqale_desktop.core.eval.scorer import DEFAULT_TIME_LIMIT_S, Score, Scorer
from sqale_desktop.core.export_formats import json_text
from sqale_desktop.core.runtime import EpisodeFn
from sqale_desktop.core.server_usage import Prices, ServerUsage, total

_log = logging.getLogger(__name__)

EPISODES_FILE = "episodes.jsonl"
RUN_FILE = "run.json"
# Tools that open a table by name; run_query opens the tables its SQL reads.
_TABLE_TOOLS = frozenset({"describe_table", "sample_rows", "distinct_values"})

UNREACHABLE_LIMIT = 3
"""Episodes in a row that could not reach a server before the run stops (a few, not one: with
several servers one may be restarting while the others answer)."""

EngineFor = Callable[[EvalQuestion, int], Engine]
DatabaseOpener = Callable[[Path], Any]


@dataclass
class RunOptions:
    """How episodes are run and scored."""

    metric: Metric = "sqale"
    condition: Condition = field(default_factory=lambda: Condition("full"))
    seed: int = 0
    concurrency: int = 1
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    # model parameters, for the TFLOPs estimate (2 x parameters x tokens processed); None: unknown
    parameters: float | None = None


class ServerUnreachable(KnownError):
    """The run stopped: its last episodes could not reach a server; the message says which and
    how to continue."""


class RunFileError(KnownError):
    """A run folder's ``run.json`` that cannot be read; the message says which file and why."""


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """The run's ``run.json`` as a JSON object, or ``RunFileError`` saying what is wrong with it.

    ``--resume`` and ``report`` read it; a file damaged by hand or by a full disk must end in a
    message, not a traceback.
    """
    path = run_dir / RUN_FILE
    try:
        data = json_input.loads(path.read_bytes())
    except OSError as exc:
        raise RunFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise RunFileError(f"{path} is damaged: {exc}") from None
    if not isinstance(data, dict):
        raise RunFileError(f"{path} is damaged: expected a JSON object")
    for key in ("settings", "engine", "protocol"):
        if not isinstance(data.get(key, {}), dict):
            raise RunFileError(f"{path} is damaged: {key!r} is not a JSON object")
    return data


# What a reader needs of each line, with the value a line lacking it (or holding the wrong type)
# is read as: the shape of an episode that could not start (``_failed_record``).
_RECORD_DEFAULTS: dict[str, Any] = {
    "ended_by": "error",
    "correct": False,
    "rounds": 0,
    "seconds": 0.0,
}
_RECORD_COUNTS: dict[str, tuple[str, ...]] = {
    "tool_calls": ("total", "distinct"),
    "tokens": ("prompt", "completion", "evaluated"),
}


def read_episodes(run_dir: Path) -> list[dict[str, Any]]:
    """Every usable line of the run's ``episodes.jsonl``.

    Lines are decoded one by one, so a torn last line (a kill -9 mid-write, possibly inside a
    multibyte character) is skipped like any line that is not a JSON object with an ``id``; a
    line lacking a field the readers need is read with that field's default (see
    ``_RECORD_DEFAULTS``) rather than failing the whole report.
    """
    path = run_dir / EPISODES_FILE
    if not path.is_file():
        return []
    records = []
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        try:
            record = json_input.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "id" in record:
            records.append(_with_defaults(record))
    return records


def _with_defaults(record: dict[str, Any]) -> dict[str, Any]:
    for key, default in _RECORD_DEFAULTS.items():
        if not _same_kind(record.get(key), default):
            record[key] = default
    for key, names in _RECORD_COUNTS.items():
        counts = record.get(key)
        counts = counts if isinstance(counts, dict) else {}
        record[key] = {**counts, **{n: counts[n] if _same_kind(counts.get(n), 0) else 0 for n in names}}
    if not isinstance(record["tool_calls"].get("per_round"), list):
        record["tool_calls"]["per_round"] = []
    return record


def _same_kind(value: Any, default: Any) -> bool:
    """Whether a JSON value can stand where ``default`` stands (an int for a float, never a bool
    for a number)."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, int | float)
    return isinstance(value, type(default))


def latest_by_question(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The last record of each question (by key), in first-seen order."""
    latest: dict[str, dict[str, Any]] = {}
    for record in records:
        latest[str(record.get("id"))] = record
    return latest


def finished_keys(run_dir: Path) -> set[str]:
    """Questions whose last episode finished (did not end in an error)."""
    return {
        key
        for key, rec in latest_by_question(read_episodes(run_dir)).items()
        if rec.get("ended_by") != "error"
    }


class EvalRun:
    """One evaluation run into ``run_dir``; see the module docstring.

    ``episode`` and ``open_database`` are a :class:`~sqale_desktop.core.runtime.Runtime`'s: each
    question runs the episode the window runs (protocol fitted to the engine, tool limits, row
    cap, query time limit from the settings), so the accuracy reported is the accuracy a user
    gets.  ``engine_for`` picks the engine of each question (one model, servers in turn, a replay
    script per question).
    """

    def __init__(
        self,
        run_dir: Path,
        engine_for: EngineFor,
        episode: EpisodeFn,
        open_database: DatabaseOpener,
        options: RunOptions,
        *,
        cache: Path,
    ) -> None:
        if options.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.run_dir = run_dir
        self.engine_for = engine_for
        self.episode = episode
        self.open_database = open_database
        self.options = options
        self.cache = cache
        self.scorer = Scorer(options.metric, time_limit_s=options.time_limit_s)
        self._cancel = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Stop every running episode and query; episodes not started yet are not started."""
        self._cancel.set()  # every episode runs on this flag; the loop interrupts its query
        self.scorer.interrupt()

    def run(self, questions: Sequence[EvalQuestion]) -> Iterator[dict[str, Any]]:
        """Run the questions not finished yet; yields each record once it is saved."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        done = finished_keys(self.run_dir)
        todo = [q for q in questions if q.key not in done]
        path = self.run_dir / EPISODES_FILE
        with (
            path.open("a", encoding="utf-8") as out,
            ThreadPoolExecutor(
                max_workers=self.options.concurrency, thread_name_prefix="eval-episode"
            ) as pool,
        ):
            pending: set[Future[dict[str, Any] | None]] = set()
            queue = iter(enumerate(todo))
            unreachable = 0
            try:
                while True:
                    # Keep only a few episodes queued beyond the running ones, so a cancel does
                    # not leave thousands of futures to drain.
                    while len(pending) < 2 * self.options.concurrency and not self.cancelled:
                        item = next(queue, None)
                        if item is None:
                            break
                        pending.add(pool.submit(self._episode, item[1], item[0]))
                    if not pending:
                        break
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in finished:
                        record = future.result()
                        if record is None:
                            continue
                        out.write(json_text(record) + "\n")
                        out.flush()
                        yield record
                        unreachable = unreachable + 1 if _unreachable(record) else 0
                        if unreachable >= UNREACHABLE_LIMIT:
                            self.cancel()
                            raise ServerUnreachable(
                                f"stopped after {unreachable} episodes in a row could not reach the "
                                f"server ({record['error']}); start it (or check --base-url) and "
                                f"continue with --resume {self.run_dir}"
                            )
            finally:
                self.cancel_if_abandoned(pending)

    def cancel_if_abandoned(self, pending: set[Future[dict[str, Any] | None]]) -> None:
        """The consumer stopped early (or an exception unwinds): stop what is still running."""
        if any(not f.done() for f in pending):
            self.cancel()

    # -- one episode ---------------------------------------------------------------------------

    def _episode(self, question: EvalQuestion, index: int) -> dict[str, Any] | None:
        """Run, score and describe one episode; None when it was cancelled.

        A bug anywhere in here becomes an ``error`` record (traceback in the log), so one bad
        question never ends a run of thousands.
        """
        if self.cancelled:
            return None
        started = time.perf_counter()
        try:
            return self._episode_unguarded(question, index)
        except Exception as exc:
            _log.exception("evaluating question %s failed", question.key)
            message = f"internal error: {type(exc).__name__}: {exc}"
            return _failed_record(question, self.options.condition, message, time.perf_counter() - started)

    def _episode_unguarded(self, question: EvalQuestion, index: int) -> dict[str, Any] | None:
        from sqale_desktop.core.db import DatabaseError

        started = time.perf_counter()
        condition = self.options.condition
        try:
            db_path, gold = prepare_database(
                question.db_path,
                question.gold_sql,
                condition,
                seed=self.options.seed,
                question_key=question.key,
                cache=self.cache,
                time_limit_s=self.options.time_limit_s,
                cancel=self._cancel,
            )
            db = self.open_database(db_path)
        except (ConditionError, DatabaseError) as exc:
            if self.cancelled:
                return None  # Ctrl+C during a reduced copy's build: not an episode
            return _failed_record(question, condition, str(exc), time.perf_counter() - started)
        try:
            engine = self.engine_for(question, index)
        except EngineError as exc:
            db.close()
            return _failed_record(question, condition, str(exc), time.perf_counter() - started)
        episode: Episode | None = None
        try:
            for event in self.episode(engine, db, question.question, self._cancel):
                if isinstance(event, EpisodeEnded):
                    episode = event.episode
        finally:
            db.close()
        if episode is None or episode.ended_by == "cancelled" or self.cancelled:
            return None
        episode.db = question.db_id  # the question's database, not the reduced copy's cache path
        score = self.scorer.score(db_path, question.gold_sql, episode.sql)
        if self.cancelled and score.pred_error and "cancelled" in score.pred_error:
            return None
        return episode_record(
            question,
            condition,
            episode,
            score,
            gold,
            seconds=time.perf_counter() - started,
            parameters=self.options.parameters,
            engine=engine.describe(),
        )


def episode_record(
    question: EvalQuestion,
    condition: Condition,
    episode: Episode,
    score: Score,
    gold_tables: Sequence[str],
    *,
    seconds: float,
    parameters: float | None,
    engine: str,
) -> dict[str, Any]:
    """One line of ``episodes.jsonl``.

    ``rounds``: assistant turns; ``tool_calls``: ``total``, ``distinct`` (by tool and arguments)
    and ``per_round``; ``tokens``: ``prompt`` (the episode prompt's final length), ``completion``
    and ``evaluated`` (what the model actually ran through); ``tflops``: 2 x parameters x
    evaluated tokens / 1e12 (None when the parameter count is unknown); ``gold_tables_opened``:
    every gold table was described, sampled, had its values listed, or was read by a
    ``run_query`` that ran (None when the gold query names no table); ``literals_seen``: the share
    of the gold query's string literals that appeared (case-insensitively) in any tool output
    before the answer (None when it has none); ``trace``: the whole episode.
    """
    calls = [call for turn in episode.turns for call in turn.calls]
    distinct = {(c.tool, json.dumps(c.args, sort_keys=True, default=str)) for c in calls}
    opened = tables_opened(episode)
    gold_lower = {t.lower() for t in gold_tables}
    literals = sql_facts.string_literals(question.gold_sql)
    seen_text = "\n".join(c.output for c in calls if c.tool != "submit_sql").lower()
    seen = [lit for lit in literals if lit.lower() in seen_text]
    stats = episode.stats
    tokens_processed = stats.evaluated_tokens or stats.prompt_tokens
    return {
        "id": question.id,
        "db_id": question.db_id,
        "condition": condition.label,
        "question": question.question,
        "gold_sql": question.gold_sql,
        "predicted_sql": episode.sql,
        "ended_by": episode.ended_by,
        "correct": score.correct,
        "f1": score.f1,
        "pred_error": score.pred_error,
        "gold_error": score.gold_error,
        "error": episode.error,
        "rounds": len(episode.turns),
        "tool_calls": {
            "total": len(calls),
            "distinct": len(distinct),
            "per_round": [len(turn.calls) for turn in episode.turns],
        },
        "tokens": {
            "prompt": stats.prompt_tokens,
            "completion": stats.completion_tokens,
            "evaluated": stats.evaluated_tokens,
        },
        "server_usage": dataclasses.asdict(stats.server_usage) if stats.server_usage is not None else None,
        "seconds": seconds,
        "tflops": 2 * parameters * tokens_processed / 1e12 if parameters else None,
        "gold_tables": list(gold_tables),
        "tables_opened": sorted(opened),
        "gold_tables_opened": gold_lower <= opened if gold_lower else None,
        "literals": len(literals),
        "literals_seen": len(seen) / len(literals) if literals else None,
        "engine": engine,
        "trace": episode.to_json(),
    }


def tables_opened(episode: Episode) -> set[str]:
    """Lower-cased names of the tables the model opened before answering (see ``episode_record``)."""
    opened: set[str] = set()
    for turn in episode.turns:
        for call in turn.calls:
            if not call.ok:
                continue
            if call.tool in _TABLE_TOOLS and isinstance(call.args.get("table_name"), str):
                opened.add(call.args["table_name"].lower())
            elif call.tool == "run_query" and isinstance(call.args.get("sql"), str):
                opened.update(sql_facts.tables(call.args["sql"]))
    return opened


def usage_totals(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The server-reported tokens of the run's episodes (the last one per question) summed, with
    their cost at the prices the episodes ran at: ``run.json``'s and the report's ``usage``.  None
    when no episode ran on a server."""
    usages: list[ServerUsage | None] = []
    prices: Prices | None = None
    for record in latest_by_question(records).values():
        usage = _usage(record.get("server_usage"))
        usages.append(usage)
        prices = prices or (usage.prices if usage is not None else None)
    summed = total(usages, prices)
    return dataclasses.asdict(summed) if summed is not None else None


def _usage(value: Any) -> ServerUsage | None:
    """A record's ``server_usage`` read back (None when absent or not of that shape)."""
    if not isinstance(value, dict):
        return None
    names = ("input_tokens", "cached_tokens", "output_tokens", "requests", "unreported")
    counts = [value.get(name) for name in names]
    numbers = [v for v in counts if isinstance(v, int) and not isinstance(v, bool)]
    if len(numbers) != len(names):
        return None
    raw = value.get("prices")
    prices = None
    if isinstance(raw, dict):
        try:
            figures = (float(raw["input"]), float(raw["cached_input"]), float(raw["output"]))
            prices = Prices(*figures, source=str(raw.get("source", "")))
        except (KeyError, TypeError, ValueError):
            prices = None
    usage = ServerUsage(
        input_tokens=numbers[0],
        cached_tokens=numbers[1],
        output_tokens=numbers[2],
        requests=numbers[3],
        unreported=numbers[4],
        prices=prices,
    )
    usage.cost_usd = usage.cost(prices)
    return usage


def _unreachable(record: dict[str, Any]) -> bool:
    """Whether the episode ended because no server answered (its engine's words say so)."""
    error = record.get("error")
    return record.get("ended_by") == "error" and isinstance(error, str) and error.startswith(UNREACHABLE)


def _failed_record(
    question: EvalQuestion, condition: Condition, message: str, seconds: float
) -> dict[str, Any]:
    """An episode that could not start (its database could not be prepared or opened)."""
    return {
        "id": question.id,
        "db_id": question.db_id,
        "condition": condition.label,
        "question": question.question,
        "gold_sql": question.gold_sql,
        "predicted_sql": None,
        "ended_by": "error",
        "correct": False,
        "f1": None,
        "pred_error": None,
        "gold_error": None,
        "error": message,
        "rounds": 0,
        "tool_calls": {"total": 0, "distinct": 0, "per_round": []},
        "tokens": {"prompt": 0, "completion": 0, "evaluated": 0},
        "server_usage": None,
        "seconds": seconds,
        "tflops": None,
        "gold_tables": [],
        "tables_opened": [],
        "gold_tables_opened": None,
        "literals": 0,
        "literals_seen": None,
        "engine": "",
        "trace": None,
    }
