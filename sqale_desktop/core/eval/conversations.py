"""Conversational question sets (SParC / CoSQL layout) and the three ways to ask their follow-ups.

The layout: a JSON list of interactions, each ``{"database_id": ..., "interaction": [{"utterance":
..., "query": ...}, ...]}`` (SParC and CoSQL's ``train.json`` / ``dev.json``; ``db_id`` is read
too), with ``database/<db_id>/<db_id>.sqlite`` beside the file as in Spider.  An interaction may
name its database file instead (``"db_path"``, relative to the file): the hand-written set over
the shared sample databases does, relative to the folder given as ``databases``.

A follow-up condition chooses how each utterance after the first is asked
(``core.agent.followup``):

``standalone``  each utterance alone, as a plain Ask (today's behaviour before follow-ups);
``continued``   a follow-up on the previous answer's thread (carried where it would not fit);
``carried``     a follow-up in the carried form: a fresh episode whose question carries the
                earlier utterances and their final SQL as text.

The evaluation harness (``EvalRun.run_conversations``) asks each turn as a question of its own
(:func:`turn_question`) on the thread :func:`follow_up_parent` gives, and scores it by execution
like any question; :func:`summarise` reads the saved turns back into execution accuracy per turn
position and the tokens evaluated per follow-up, per condition.  A turn whose episode failed is
scored wrong and the thread goes on from the last answer that finished.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sqale_desktop.core import json_input
from sqale_desktop.core.agent.events import Episode
from sqale_desktop.core.agent.followup import Thread
from sqale_desktop.core.eval.question_types import EvalQuestion, QuestionSetError, database_file
from sqale_desktop.core.json_input import JsonInputError

FollowUps = Literal["standalone", "continued", "carried"]
FOLLOW_UPS: tuple[FollowUps, ...] = ("standalone", "continued", "carried")


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
    db_path = (base / given).resolve() if isinstance(given, str) else database_file(base / "database", db_id)
    return Interaction(str(record.get("id", index)), db_id, db_path, tuple(parsed))


def parse_follow_ups(text: str) -> list[FollowUps]:
    """``standalone``, ``continued``, ``carried`` or several of them, comma-separated, in order;
    :class:`ValueError` names what is not one of them."""
    chosen: list[FollowUps] = []
    for word in (part.strip() for part in text.split(",")):
        known = next((name for name in FOLLOW_UPS if name == word), None)
        if known is None:
            raise ValueError(f"unknown follow-up condition {word!r} (standalone, continued or carried)")
        if known not in chosen:
            chosen.append(known)
    return chosen


def turn_question(interaction: Interaction, position: int) -> EvalQuestion:
    """The ``position``-th utterance (1-based) as a question: its id is ``<interaction>/<position>``
    (what replay scripts and resumed runs name it by)."""
    turn = interaction.turns[position - 1]
    return EvalQuestion(
        f"{interaction.id}/{position}",
        interaction.db_id,
        interaction.db_path,
        turn.utterance,
        turn.gold_sql,
    )


def turn_keys(interaction: Interaction) -> list[str]:
    """The ids of an interaction's turns (:func:`turn_question`'s), in order."""
    return [turn_question(interaction, p).key for p in range(1, len(interaction.turns) + 1)]


def follow_up_parent(condition: FollowUps, last: Episode | None) -> Thread | None:
    """The thread the next utterance follows up under ``condition``: none when standalone or
    before any answer finished, else the last finished answer's (to be carried when ``carried``)."""
    if condition == "standalone" or last is None:
        return None
    return Thread.of(last, carry=condition == "carried")


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per follow-up condition of a run's turn records (``episodes.jsonl``, the last line per
    turn): execution accuracy per turn position, and mean tokens evaluated per follow-up (turns
    after the first), with how many follow-ups each form took."""
    turns = [r for r in records if isinstance(r.get("turn"), int) and r.get("condition") in FOLLOW_UPS]
    summary: dict[str, Any] = {}
    for condition in FOLLOW_UPS:
        mine = [r for r in turns if r["condition"] == condition]
        if not mine:
            continue
        positions: dict[str, Any] = {}
        for position in sorted({r["turn"] for r in mine}):
            at = [r for r in mine if r["turn"] == position]
            positions[str(position)] = {
                "n": len(at),
                "accuracy": sum(bool(r["correct"]) for r in at) / len(at),
            }
        follow_ups = [r for r in mine if r["turn"] > 1]
        forms: dict[str, int] = {}
        for record in follow_ups:
            form = str(record.get("follow_up"))
            forms[form] = forms.get(form, 0) + 1
        evaluated = [int(r["tokens"]["evaluated"]) for r in follow_ups]
        summary[condition] = {
            "turns": len(mine),
            "accuracy": sum(bool(r["correct"]) for r in mine) / len(mine),
            "by_position": positions,
            "evaluated_tokens_per_follow_up": sum(evaluated) / len(evaluated) if evaluated else None,
            "follow_up_forms": forms,
        }
    return summary
