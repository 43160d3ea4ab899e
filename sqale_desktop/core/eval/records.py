"""One line of a run's ``episodes.jsonl``: :class:`EpisodeRecord`, built from a finished episode,
and the file read back.

An episode that could not start (its database could not be prepared or opened, its engine could
not be built, a bug) is the record's defaults with the question and the error filled in; a line
that lacks a field the readers need, or holds the wrong type there, is read with the same
defaults.  Each question counts with its last line (a resumed run may hold an earlier errored
attempt); questions are told apart by condition and id, since one run may ask the same
conversation's turns under several follow-up conditions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqale_desktop.core import json_input
from sqale_desktop.core.agent.events import Episode
from sqale_desktop.core.eval import sql_facts
from sqale_desktop.core.eval.questions import EvalQuestion
from sqale_desktop.core.eval.scorer import Score
from sqale_desktop.core.server_usage import Prices, ServerUsage, total

EPISODES_FILE = "episodes.jsonl"
# Tools that open a table by name; run_query opens the tables its SQL reads.
_TABLE_TOOLS = frozenset({"describe_table", "sample_rows", "distinct_values"})


@dataclass
class ConversationTurn:
    """Where a record stands in a conversation: its interaction, its 1-based position, and how the
    loop asked it (``standalone``, ``continued`` or ``carried``)."""

    interaction: str
    turn: int
    follow_up: str


@dataclass
class EpisodeRecord:
    """One line of ``episodes.jsonl``; the defaults are an episode that could not start.

    ``rounds``: assistant turns; ``tool_calls``: ``total``, ``distinct`` (by tool and arguments)
    and ``per_round``; ``tokens``: ``prompt`` (the episode prompt's final length), ``completion``
    and ``evaluated`` (what the model actually ran through); ``tflops``: 2 x parameters x
    evaluated tokens / 1e12 (None when the parameter count is unknown); ``gold_tables_opened``:
    every gold table was described, sampled, had its values listed, or was read by a
    ``run_query`` that ran (None when the gold query names no table); ``literals_seen``: the share
    of the gold query's string literals that appeared (case-insensitively) in any tool output
    before the answer (None when it has none); ``trace``: the whole episode; ``conversation``: a
    conversation's turn (its fields are written on the line; a single question has none).
    """

    id: Any
    db_id: str
    condition: str
    question: str
    gold_sql: str
    predicted_sql: str | None = None
    ended_by: str = "error"
    correct: bool = False
    f1: float | None = None
    pred_error: str | None = None
    gold_error: str | None = None
    error: str | None = None
    rounds: int = 0
    tool_calls: dict[str, Any] = field(default_factory=lambda: {"total": 0, "distinct": 0, "per_round": []})
    tokens: dict[str, int] = field(default_factory=lambda: {"prompt": 0, "completion": 0, "evaluated": 0})
    server_usage: dict[str, Any] | None = None
    seconds: float = 0.0
    tflops: float | None = None
    gold_tables: list[str] = field(default_factory=list)
    tables_opened: list[str] = field(default_factory=list)
    gold_tables_opened: bool | None = None
    literals: int = 0
    literals_seen: float | None = None
    engine: str = ""
    trace: dict[str, Any] | None = None
    conversation: ConversationTurn | None = None

    @classmethod
    def failed(
        cls,
        question: EvalQuestion,
        condition: str,
        message: str,
        seconds: float,
        conversation: ConversationTurn | None = None,
    ) -> EpisodeRecord:
        """An episode that could not start, or broke: the defaults, the question and why."""
        return cls(
            question.id,
            question.db_id,
            condition,
            question.question,
            question.gold_sql,
            error=message,
            seconds=seconds,
            conversation=conversation,
        )

    def to_json(self) -> dict[str, Any]:
        """The line's object: the fields in order, a conversation's turn flattened at the end."""
        line = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "conversation"}
        if self.conversation is not None:
            line.update(dataclasses.asdict(self.conversation))
        return line


def episode_record(
    question: EvalQuestion,
    condition: str,
    episode: Episode,
    score: Score,
    gold_tables: Sequence[str],
    *,
    seconds: float,
    parameters: float | None,
    engine: str,
    conversation: ConversationTurn | None = None,
) -> EpisodeRecord:
    """The record of a finished episode (see :class:`EpisodeRecord` for what each field means)."""
    calls = [call for turn in episode.turns for call in turn.calls]
    distinct = {(c.tool, json.dumps(c.args, sort_keys=True, default=str)) for c in calls}
    opened = tables_opened(episode)
    gold_lower = {t.lower() for t in gold_tables}
    literals = sql_facts.string_literals(question.gold_sql)
    seen_text = "\n".join(c.output for c in calls if c.tool != "submit_sql").lower()
    seen = [lit for lit in literals if lit.lower() in seen_text]
    stats = episode.stats
    tokens_processed = stats.evaluated_tokens or stats.prompt_tokens
    return EpisodeRecord(
        id=question.id,
        db_id=question.db_id,
        condition=condition,
        question=question.question,
        gold_sql=question.gold_sql,
        predicted_sql=episode.sql,
        ended_by=episode.ended_by,
        correct=score.correct,
        f1=score.f1,
        pred_error=score.pred_error,
        gold_error=score.gold_error,
        error=episode.error,
        rounds=len(episode.turns),
        tool_calls={
            "total": len(calls),
            "distinct": len(distinct),
            "per_round": [len(turn.calls) for turn in episode.turns],
        },
        tokens={
            "prompt": stats.prompt_tokens,
            "completion": stats.completion_tokens,
            "evaluated": stats.evaluated_tokens,
        },
        server_usage=dataclasses.asdict(stats.server_usage) if stats.server_usage is not None else None,
        seconds=seconds,
        tflops=2 * parameters * tokens_processed / 1e12 if parameters else None,
        gold_tables=list(gold_tables),
        tables_opened=sorted(opened),
        gold_tables_opened=gold_lower <= opened if gold_lower else None,
        literals=len(literals),
        literals_seen=len(seen) / len(literals) if literals else None,
        engine=engine,
        trace=episode.to_json(),
        conversation=conversation,
    )


def tables_opened(episode: Episode) -> set[str]:
    """Lower-cased names of the tables the model opened before answering (see ``EpisodeRecord``)."""
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


def _default(name: str) -> Any:
    spec = next(f for f in dataclasses.fields(EpisodeRecord) if f.name == name)
    return spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default


# What a reader needs of each line, with the value a line lacking it (or holding the wrong type
# there) is read as: the record's own default.
_READ_DEFAULTS = {name: _default(name) for name in ("ended_by", "correct", "rounds", "seconds")}
_READ_COUNTS = {
    name: tuple(k for k, v in _default(name).items() if isinstance(v, int))
    for name in ("tool_calls", "tokens")
}


def read_episodes(run_dir: Path) -> list[dict[str, Any]]:
    """Every usable line of the run's ``episodes.jsonl``.

    Lines are decoded one by one, so a torn last line (a kill -9 mid-write, possibly inside a
    multibyte character) is skipped like any line that is not a JSON object with an ``id``; a
    line lacking a field the readers need is read with :class:`EpisodeRecord`'s default there
    rather than failing the whole report.
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
    for key, default in _READ_DEFAULTS.items():
        if not _same_kind(record.get(key), default):
            record[key] = default
    for key, names in _READ_COUNTS.items():
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


def record_key(record: dict[str, Any]) -> tuple[str, str]:
    """What tells a line's question apart: its condition and its id, as text."""
    return str(record.get("condition")), str(record.get("id"))


def latest_by_question(records: Sequence[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The last record of each question (by :func:`record_key`), in first-seen order."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        latest[record_key(record)] = record
    return latest


def finished_keys(run_dir: Path) -> set[tuple[str, str]]:
    """The (condition, id) of every question whose last episode finished (not in an error)."""
    return {
        key
        for key, rec in latest_by_question(read_episodes(run_dir)).items()
        if rec.get("ended_by") != "error"
    }


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
