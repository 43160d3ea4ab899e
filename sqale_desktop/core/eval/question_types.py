"""What a question set is, apart from how each format is read (``questions``, ``sqale_release``).

Both readers build these; keeping them here lets ``questions`` dispatch to ``sqale_release``
without the two importing each other.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from sqale_desktop.core.errors import KnownError

Format = Literal["plain", "spider", "bird", "sqale", "sparc"]
"""``sparc``: a conversational set (SParC / CoSQL layout), read by ``conversations``."""

T = TypeVar("T")


class QuestionSetError(KnownError):
    """A question set that cannot be read; the message says which file and why."""


def database_file(databases: Path, db_id: str) -> Path:
    """Database ``db_id`` in a Spider-layout folder (Spider, BIRD, SParC, CoSQL):
    ``databases/<db_id>/<db_id>.sqlite``, resolved."""
    return (databases / db_id / f"{db_id}.sqlite").resolve()


@dataclass(frozen=True)
class EvalQuestion:
    """One question: ``id`` is kept as the source spells it (an int for the plain Spider list)."""

    id: Any
    db_id: str
    db_path: Path
    question: str
    gold_sql: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The id as text: predictions and resumed runs are matched on it."""
        return str(self.id)


@dataclass
class QuestionSet:
    """Questions read from ``source`` in ``format``; ``notes`` say what was skipped and why."""

    source: str
    format: Format
    questions: list[EvalQuestion]
    phrasing: str | None = None
    notes: list[str] = field(default_factory=list)

    def select(self, *, limit: int | None = None, sample: int | None = None, seed: int = 0) -> None:
        """Keep a random ``sample`` (seeded, in file order) and/or the first ``limit`` questions."""
        self.questions = select(self.questions, limit=limit, sample=sample, seed=seed)


def select(items: list[T], *, limit: int | None = None, sample: int | None = None, seed: int = 0) -> list[T]:
    """A random ``sample`` of ``items`` (seeded, in their order) and/or the first ``limit``: the
    questions of a set, or the interactions of a conversational one."""
    if sample is not None and sample < len(items):
        chosen = sorted(random.Random(seed).sample(range(len(items)), sample))
        items = [items[i] for i in chosen]
    return items if limit is None else items[:limit]
