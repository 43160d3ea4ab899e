"""Running gold and predicted SQL for a metric, read-only and time-limited, and scoring the pair.

Both queries run through the app's own read-only database (``mode=ro``, the authorizer
allow-list, a progress-handler time limit), so a prediction that writes is refused, one that hangs
is stopped at the time limit, and one whose result would fill memory is stopped at ``max_rows``;
each of these counts as wrong with its reason in ``pred_error``.  A gold query that fails is
reported in ``gold_error`` (the question then counts as wrong: it cannot be scored), never raised.

Gold results are cached per (database, query as run), since question sets ask many questions with
the same gold SQL.  One ``Scorer`` may be used from several threads (``eval run --concurrency``):
``ReadOnlyDatabase`` keeps one connection per thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqale_desktop.core import json_input
from sqale_desktop.core.db.connection import ReadOnlyDatabase, open_readonly
from sqale_desktop.core.db.errors import DatabaseError
from sqale_desktop.core.eval.metrics import Metric, Row, multiset_f1, prepare_sql, results_match
from sqale_desktop.core.eval.questions import EvalQuestion

DEFAULT_TIME_LIMIT_S = 30.0
# Enough for every gold result of Spider, BIRD and SQaLe; a prediction returning more rows than
# this is a runaway (a cross join) and is stopped rather than held in memory.
DEFAULT_MAX_ROWS = 200_000


NO_PREDICTION = "no prediction"
"""The ``pred_error`` of a question the predictions do not answer: counted apart from the
predictions that ran and failed, since nothing was executed."""


@dataclass(frozen=True)
class Execution:
    """The rows a query returned, or why it returned none."""

    rows: list[Row] | None
    error: str | None = None


@dataclass(frozen=True)
class Score:
    """The verdict on one prediction.

    ``f1``: 1.0 when correct, the multiset F1 of the rows when the prediction ran but is wrong,
    None when there is nothing to compare (the prediction or the gold query did not run).
    """

    correct: bool
    f1: float | None
    pred_error: str | None
    gold_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "correct": self.correct,
            "f1": self.f1,
            "pred_error": self.pred_error,
            "gold_error": self.gold_error,
        }


def _decode_ignoring(raw: bytes) -> str:
    """Text decoded ignoring bad bytes, as the Spider script reads it."""
    return raw.decode("utf-8", errors="ignore")


class Scorer:
    """Scores predictions under one metric; see the module docstring."""

    def __init__(
        self,
        metric: Metric = "sqale",
        *,
        time_limit_s: float = DEFAULT_TIME_LIMIT_S,
        max_rows: int = DEFAULT_MAX_ROWS,
    ) -> None:
        self.metric: Metric = metric
        self.time_limit_s = time_limit_s
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._running: set[ReadOnlyDatabase] = set()
        self._gold: dict[tuple[Path, str], Execution] = {}

    def score(self, db_path: Path, gold_sql: str, pred_sql: str | None) -> Score:
        """Run both queries on ``db_path`` and compare them under the metric.

        Without a prediction nothing runs: it is wrong whatever the gold query returns, and a
        predictions file that covers a few of 100,000 questions must not run every gold query.
        """
        if not pred_sql or not pred_sql.strip():
            return Score(False, None, NO_PREDICTION)
        gold = self.gold(db_path, gold_sql)
        if gold.rows is None:
            return Score(False, None, None, gold_error=gold.error)
        pred = self.execute(db_path, pred_sql)
        if pred.rows is None:
            return Score(False, None, pred.error)
        if results_match(self.metric, gold_sql, gold.rows, pred.rows):
            return Score(True, 1.0, None)
        return Score(False, multiset_f1(gold.rows, pred.rows), None)

    def gold(self, db_path: Path, gold_sql: str) -> Execution:
        """The gold query's result on ``db_path`` (cached)."""
        key = (db_path, prepare_sql(self.metric, gold_sql))
        with self._lock:
            cached = self._gold.get(key)
        if cached is not None:
            return cached
        result = self.execute(db_path, gold_sql)
        with self._lock:
            self._gold[key] = result
        return result

    def execute(self, db_path: Path, sql: str) -> Execution:
        """Run ``sql`` as the metric runs it; never raises for conditions of the world.

        The database is opened for this one statement and closed after it: an evaluation touches
        hundreds of files from several threads, and keeping them all open would run out of file
        descriptors; opening a file read-only costs well under a millisecond.
        """
        try:
            db = self._open(db_path)
        except DatabaseError as exc:
            return Execution(None, str(exc))
        with self._lock:
            self._running.add(db)
        try:
            result = db.execute(prepare_sql(self.metric, sql), max_rows=self.max_rows)
        except DatabaseError as exc:
            return Execution(None, str(exc))
        finally:
            with self._lock:
                self._running.discard(db)
            db.close()
        if result.truncated:
            return Execution(None, f"the result has more than {self.max_rows} rows")
        return Execution([tuple(row) for row in result.rows])

    def interrupt(self) -> None:
        """Stop every query running in this scorer (Ctrl+C)."""
        with self._lock:
            running = list(self._running)
        for db in running:
            db.interrupt()

    def _open(self, path: Path) -> ReadOnlyDatabase:
        plain = open_readonly(path, time_limit_s=self.time_limit_s)
        if self.metric != "spider":
            return plain
        plain.close()
        return ReadOnlyDatabase(
            plain.path,
            immutable=plain.immutable,
            time_limit_s=self.time_limit_s,
            notes=plain.notes,
            decode=_decode_ignoring,
        )


def read_predictions(path: Path) -> dict[str, str]:
    """``{"id": ..., "sql": ...}`` lines (JSON Lines) as ``{str(id): sql}``; raises ``ValueError``.

    ``sql`` is text or null (no prediction).  Ids are matched as text, so two lines whose ids read
    the same (``1`` and ``"1"``) are refused rather than one silently replacing the other.
    """
    predictions: dict[str, str] = {}
    lines_of: dict[str, int] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text: {exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json_input.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}, line {number}: {exc}") from None
        if not isinstance(record, dict) or "id" not in record or "sql" not in record:
            raise ValueError(f'{path}, line {number}: expected {{"id": ..., "sql": "..."}}')
        sql = record["sql"]
        if sql is not None and not isinstance(sql, str):
            raise ValueError(f"{path}, line {number}: sql must be text or null, not {type(sql).__name__}")
        key = str(record["id"])
        if key in lines_of:
            raise ValueError(f"{path}, line {number}: the id {key} was given already on line {lines_of[key]}")
        lines_of[key] = number
        predictions[key] = sql or ""
    return predictions


def score_questions(
    questions: Sequence[EvalQuestion],
    predictions: Mapping[str, str],
    scorer: Scorer,
    *,
    on_scored: Callable[[EvalQuestion, Score], None] | None = None,
) -> dict[str, Any]:
    """Score ``predictions`` (by question key) over ``questions``: the ``eval score --json`` object.

    A question without a prediction counts as wrong (``pred_error`` "no prediction") and is
    counted in ``no_prediction``, not in ``failed_to_execute`` (the predictions that ran and failed).
    """
    entries: list[dict[str, Any]] = []
    correct = failed = missing = gold_failed = 0
    for question in questions:
        score = scorer.score(question.db_path, question.gold_sql, predictions.get(question.key))
        correct += score.correct
        missing += score.pred_error == NO_PREDICTION
        failed += score.pred_error is not None and score.pred_error != NO_PREDICTION
        gold_failed += score.gold_error is not None
        entries.append({"id": question.id, **score.to_json()})
        if on_scored is not None:
            on_scored(question, score)
    total = len(entries)
    return {
        "metric": scorer.metric,
        "total": total,
        "correct": correct,
        "accuracy": correct / total if total else 0.0,
        "failed_to_execute": failed,
        "no_prediction": missing,
        "gold_failed": gold_failed,
        "questions": entries,
    }
