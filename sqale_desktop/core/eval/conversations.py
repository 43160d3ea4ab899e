"""Conversational question sets (SParC / CoSQL layout) and the three ways to ask their follow-ups.

The layout: a JSON list of interactions, each ``{"database_id": ..., "interaction": [{"utterance":
..., "query": ...}, ...]}`` (SParC and CoSQL's ``train.json`` / ``dev.json``; ``db_id`` is read
too), with ``database/<db_id>/<db_id>.sqlite`` beside the file as in Spider.  An interaction may
name its database file instead (``"db_path"``, relative to the file): the hand-written set over
the shared sample databases does, relative to the folder given as ``databases``.

A condition chooses how each utterance after the first is asked (``core.agent.followup``):

``standalone``  each utterance alone, as a plain Ask (today's behaviour before follow-ups);
``continued``   a follow-up on the previous answer's thread (carried where it would not fit);
``carried``     a follow-up in the carried form: a fresh episode whose question carries the
                earlier utterances and their final SQL as text.

Each turn is scored by execution against its gold query (``metrics.results_match``, Spider's
rules by default), and :func:`summarise` gives execution accuracy per turn position and the
tokens evaluated per follow-up, per condition.  A turn whose episode was stopped or failed is
scored wrong and the thread goes on from the last answer that finished.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sqale_desktop.core import json_input
from sqale_desktop.core.agent.events import Episode, EpisodeEnded
from sqale_desktop.core.agent.followup import Thread
from sqale_desktop.core.eval.metrics import Metric, prepare_sql, results_match
from sqale_desktop.core.eval.question_types import QuestionSetError
from sqale_desktop.core.json_input import JsonInputError

Condition = Literal["standalone", "continued", "carried"]
CONDITIONS: tuple[Condition, ...] = ("standalone", "continued", "carried")
GOLD_ROWS = 100_000


@dataclass(frozen=True)
class Turn:
    utterance: str
    gold_sql: str


@dataclass(frozen=True)
class Interaction:
    """One conversation: its database and its utterances with their gold SQL, in order."""

    id: str
    db_id: str
    db_path: Path
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class TurnResult:
    """One asked utterance: how it was asked, whether its answer matched, what it evaluated."""

    interaction: str
    position: int  # 1-based
    condition: Condition
    form: str  # "standalone", "continued" or "carried": how the loop actually asked it
    correct: bool
    evaluated_tokens: int
    sql: str | None


def load_conversations(path: Path, databases: Path | None = None) -> tuple[list[Interaction], list[str]]:
    """The interactions of a SParC/CoSQL-layout file, and notes (interactions skipped, and why).

    ``databases``: the folder the database paths are relative to (default: the file's folder).

    Raises :class:`QuestionSetError` for a file that is not such a set.
    """
    try:
        data: Any = json_input.loads(path.read_bytes())
    except JsonInputError as exc:
        raise QuestionSetError(str(exc)) from exc
    except OSError as exc:
        raise QuestionSetError(f"{path}: {exc.strerror or exc}") from exc
    if not isinstance(data, list):
        raise QuestionSetError(f"{path}: expected a JSON list of interactions")
    interactions: list[Interaction] = []
    missing = 0
    for index, record in enumerate(data):
        interaction = _interaction(path, databases or path.parent, index, record)
        if interaction.db_path.is_file():
            interactions.append(interaction)
        else:
            missing += 1
    notes = [f"{missing} interactions skipped: their database file is missing"] if missing else []
    return interactions, notes


def _interaction(path: Path, base: Path, index: int, record: Any) -> Interaction:
    where = f"{path}: interaction {index}"
    if not isinstance(record, dict):
        raise QuestionSetError(f"{where} is not an object")
    db_id = record.get("database_id", record.get("db_id"))
    turns = record.get("interaction")
    if not isinstance(db_id, str) or not isinstance(turns, list) or not turns:
        raise QuestionSetError(f"{where} needs a database_id and a non-empty interaction list")
    parsed = []
    for number, turn in enumerate(turns):
        if not (isinstance(turn, dict) and isinstance(turn.get("utterance"), str)):
            raise QuestionSetError(f"{where}, turn {number}: no utterance")
        query = turn.get("query", turn.get("sql"))
        if not isinstance(query, str):
            raise QuestionSetError(f"{where}, turn {number}: no query")
        parsed.append(Turn(turn["utterance"], query))
    given = record.get("db_path")
    db_path = base / given if isinstance(given, str) else base / "database" / db_id / f"{db_id}.sqlite"
    return Interaction(str(record.get("id", index)), db_id, db_path.resolve(), tuple(parsed))


def run_interaction(
    episode_fn: Any,
    engine: Any,
    db: Any,
    interaction: Interaction,
    condition: Condition,
    cancel: threading.Event,
    metric: Metric = "spider",
) -> Iterator[TurnResult]:
    """Ask the interaction's utterances in order under ``condition``; one result per utterance.

    ``episode_fn`` is the runtime's episode function (``core.runtime.EpisodeFn``), so follow-ups
    are built exactly as the window and ``ask --follow-up`` build them.
    """
    last: Episode | None = None
    for position, turn in enumerate(interaction.turns, start=1):
        parent = None
        if condition != "standalone" and last is not None:
            parent = Thread.of(last, carry=condition == "carried")
        episode = _episode(episode_fn(engine, db, turn.utterance, cancel, parent=parent))
        if episode.ended_by not in ("cancelled", "error"):
            last = episode
        yield TurnResult(
            interaction=interaction.id,
            position=position,
            condition=condition,
            form=episode.follow_up or "standalone",
            correct=episode.ended_by not in ("cancelled", "error")
            and matches(db, turn.gold_sql, episode.sql, metric),
            evaluated_tokens=episode.stats.evaluated_tokens,
            sql=episode.sql,
        )


def _episode(events: Iterator[Any]) -> Episode:
    for event in events:
        if isinstance(event, EpisodeEnded):
            return event.episode
    raise RuntimeError("the episode ended without an EpisodeEnded event")


def matches(db: Any, gold_sql: str, sql: str | None, metric: Metric = "spider") -> bool:
    """Whether ``sql`` returns what ``gold_sql`` returns on ``db`` (read-only), under ``metric``."""
    if not sql:
        return False
    try:
        gold = db.execute(prepare_sql(metric, gold_sql), max_rows=GOLD_ROWS).rows
        pred = db.execute(prepare_sql(metric, sql), max_rows=GOLD_ROWS).rows
    except Exception:  # a prediction that does not run is simply wrong
        return False
    return results_match(metric, gold_sql, [tuple(r) for r in gold], [tuple(r) for r in pred])


def summarise(results: Sequence[TurnResult]) -> dict[str, Any]:
    """Per condition: execution accuracy per turn position, and mean tokens evaluated per follow-up
    (turns after the first), with how many follow-ups each form took."""
    summary: dict[str, Any] = {}
    for condition in CONDITIONS:
        mine = [r for r in results if r.condition == condition]
        if not mine:
            continue
        positions: dict[str, Any] = {}
        for position in sorted({r.position for r in mine}):
            at = [r for r in mine if r.position == position]
            positions[str(position)] = {"n": len(at), "accuracy": sum(r.correct for r in at) / len(at)}
        follow_ups = [r for r in mine if r.position > 1]
        forms: dict[str, int] = {}
        for result in follow_ups:
            forms[result.form] = forms.get(result.form, 0) + 1
        summary[condition] = {
            "turns": len(mine),
            "accuracy": sum(r.correct for r in mine) / len(mine),
            "by_position": positions,
            "evaluated_tokens_per_follow_up": (
                sum(r.evaluated_tokens for r in follow_ups) / len(follow_ups) if follow_ups else None
            ),
            "follow_up_forms": forms,
        }
    return summary
