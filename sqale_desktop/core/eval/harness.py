"""``EvalRun``: real agent episodes over a question set, each scored and saved as it finishes.

The run folder holds ``run.json`` (the settings that produced the run) and ``episodes.jsonl``, one
line per finished episode, appended and flushed as soon as the episode is scored, so an
interrupted run loses nothing and ``resume`` continues where it stopped: a question whose last
line is a finished episode is not run again (an episode that ended in an engine or database
error is run again; its old line stays for the record, and readers take the last line per id).

A conversational set (``conversations``) is asked interaction by interaction under each
follow-up condition: its turns run in order, each on the thread the condition chooses, and are
saved together when the interaction ends; an interaction stopped midway saves nothing and one
whose turns did not all finish is asked again whole (its thread cannot be picked up halfway).

Episodes run on a thread pool (``concurrency``) so that a serving cluster (``--engine openai``)
works on many at once while this process only executes tools; the in-process llama engine must be
given ``concurrency=1``.  ``cancel()`` (Ctrl+C) stops every running episode the way the app's Stop
button does (the shared flag plus a database interrupt); a cancelled episode is not recorded.

A run whose server cannot be reached stops: after ``UNREACHABLE_LIMIT`` episodes in a row end
because no server answered (refused, unknown host, no connection in time), ``run`` raises
:class:`ServerUnreachable` instead of writing an error line for every question in seconds.

What each line holds is documented on :class:`~sqale_desktop.core.eval.records.EpisodeRecord`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from sqale_desktop.core import json_input
from sqale_desktop.core.agent.events import Episode, EpisodeEnded
from sqale_desktop.core.agent.followup import Thread
from sqale_desktop.core.engines.base import Engine, EngineError
from sqale_desktop.core.engines.openai_http import UNREACHABLE
from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.eval.conditions import Condition, ConditionError, prepare_database
from sqale_desktop.core.eval.conversations import (
    FollowUps,
    Interaction,
    follow_up_parent,
    turn_keys,
    turn_question,
)
from sqale_desktop.core.eval.metrics import Metric
from sqale_desktop.core.eval.questions import EvalQuestion
from sqale_desktop.core.eval.records import (
    EPISODES_FILE,
    ConversationTurn,
    EpisodeRecord,
    episode_record,
    finished_keys,
)
from sqale_desktop.core.eval.scorer import DEFAULT_TIME_LIMIT_S, Scorer
from sqale_desktop.core.export_formats import json_text
from sqale_desktop.core.runtime import EpisodeFn

_log = logging.getLogger(__name__)

RUN_FILE = "run.json"
FULL = Condition("full")

UNREACHABLE_LIMIT = 3
"""Episodes in a row that could not reach a server before the run stops (a few, not one: with
several servers one may be restarting while the others answer)."""

EngineFor = Callable[[EvalQuestion, int], Engine]
DatabaseOpener = Callable[[Path], Any]
Job = Callable[[], list[EpisodeRecord]]


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

    def run(self, questions: Sequence[EvalQuestion]) -> Iterator[EpisodeRecord]:
        """Run the questions not finished yet; yields each record once it is saved."""
        done = finished_keys(self.run_dir)
        label = self.options.condition.label
        todo = [q for q in questions if (label, q.key) not in done]
        yield from self._drive([partial(self._question, q, index) for index, q in enumerate(todo)])

    def run_conversations(
        self, interactions: Sequence[Interaction], conditions: Sequence[FollowUps]
    ) -> Iterator[EpisodeRecord]:
        """Ask each interaction not finished yet under each follow-up condition (one condition
        after the other); yields each turn's record once its interaction is saved."""
        done = finished_keys(self.run_dir)
        todo = [
            (condition, interaction)
            for condition in conditions
            for interaction in interactions
            if not all((condition, key) in done for key in turn_keys(interaction))
        ]
        jobs = [partial(self._conversation, i, c, index) for index, (c, i) in enumerate(todo)]
        yield from self._drive(jobs)

    def _drive(self, jobs: Sequence[Job]) -> Iterator[EpisodeRecord]:
        """Run the jobs on the pool, saving and yielding their records as each job ends."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / EPISODES_FILE
        with (
            path.open("a", encoding="utf-8") as out,
            ThreadPoolExecutor(
                max_workers=self.options.concurrency, thread_name_prefix="eval-episode"
            ) as pool,
        ):
            pending: set[Future[list[EpisodeRecord]]] = set()
            queue = iter(jobs)
            unreachable = 0
            try:
                while True:
                    # Keep only a few jobs queued beyond the running ones, so a cancel does not
                    # leave thousands of futures to drain.
                    while len(pending) < 2 * self.options.concurrency and not self.cancelled:
                        job = next(queue, None)
                        if job is None:
                            break
                        pending.add(pool.submit(job))
                    if not pending:
                        break
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in finished:
                        for record in future.result():
                            out.write(json_text(record.to_json()) + "\n")
                            out.flush()
                            yield record
                            unreachable = unreachable + 1 if _unreachable(record) else 0
                            if unreachable >= UNREACHABLE_LIMIT:
                                self.cancel()
                                raise ServerUnreachable(
                                    f"stopped after {unreachable} episodes in a row could not reach "
                                    f"the server ({record.error}); start it (or check --base-url) and "
                                    f"continue with --resume {self.run_dir}"
                                )
            finally:
                self.cancel_if_abandoned(pending)

    def cancel_if_abandoned(self, pending: set[Future[list[EpisodeRecord]]]) -> None:
        """The consumer stopped early (or an exception unwinds): stop what is still running."""
        if any(not f.done() for f in pending):
            self.cancel()

    # -- one question, one conversation ------------------------------------------------------------

    def _question(self, question: EvalQuestion, index: int) -> list[EpisodeRecord]:
        """The record of one question's episode; none when it was cancelled."""
        condition = self.options.condition
        record, _ = self._guarded(question, index, condition, condition.label)
        return [] if record is None else [record]

    def _conversation(
        self, interaction: Interaction, condition: FollowUps, index: int
    ) -> list[EpisodeRecord]:
        """The records of an interaction's turns asked in order under ``condition``; none when it
        was cancelled.  A turn that failed is scored wrong and the next one follows up the last
        answer that finished."""
        records: list[EpisodeRecord] = []
        last: Episode | None = None
        for position in range(1, len(interaction.turns) + 1):
            parent = follow_up_parent(condition, last)
            question = turn_question(interaction, position)
            place = (interaction.id, position)
            record, episode = self._guarded(question, index, FULL, condition, parent, place)
            if record is None:
                return []
            records.append(record)
            if episode is not None and episode.ended_by not in ("cancelled", "error"):
                last = episode
        return records

    def _guarded(
        self,
        question: EvalQuestion,
        index: int,
        condition: Condition,
        label: str,
        parent: Thread | None = None,
        place: tuple[str, int] | None = None,
    ) -> tuple[EpisodeRecord | None, Episode | None]:
        """Run, score and describe one episode; no record when it was cancelled.

        ``parent``: the thread a conversation's turn follows up; ``place``: the turn's interaction
        and position (None for a single question).  A bug anywhere in here becomes an ``error``
        record (traceback in the log), so one bad question never ends a run of thousands.
        """
        if self.cancelled:
            return None, None
        started = time.perf_counter()
        try:
            return self._ask(question, index, condition, label, parent, place)
        except Exception as exc:
            _log.exception("evaluating question %s failed", question.key)
            message = f"internal error: {type(exc).__name__}: {exc}"
            seconds = time.perf_counter() - started
            return EpisodeRecord.failed(question, label, message, seconds, _turn(place, parent, None)), None

    def _ask(
        self,
        question: EvalQuestion,
        index: int,
        condition: Condition,
        label: str,
        parent: Thread | None,
        place: tuple[str, int] | None,
    ) -> tuple[EpisodeRecord | None, Episode | None]:
        from sqale_desktop.core.db import DatabaseError

        started = time.perf_counter()

        def failed(message: str) -> tuple[EpisodeRecord, None]:
            seconds = time.perf_counter() - started
            return EpisodeRecord.failed(question, label, message, seconds, _turn(place, parent, None)), None

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
                return None, None  # Ctrl+C during a reduced copy's build: not an episode
            return failed(str(exc))
        try:
            engine = self.engine_for(question, index)
        except EngineError as exc:
            db.close()
            return failed(str(exc))
        episode: Episode | None = None
        try:
            for event in self.episode(engine, db, question.question, self._cancel, parent=parent):
                if isinstance(event, EpisodeEnded):
                    episode = event.episode
        finally:
            db.close()
        if episode is None or episode.ended_by == "cancelled" or self.cancelled:
            return None, None
        episode.db = question.db_id  # the question's database, not the reduced copy's cache path
        score = self.scorer.score(db_path, question.gold_sql, episode.sql)
        if self.cancelled and score.pred_error and "cancelled" in score.pred_error:
            return None, None
        record = episode_record(
            question,
            label,
            episode,
            score,
            gold,
            seconds=time.perf_counter() - started,
            parameters=self.options.parameters,
            engine=engine.describe(),
            conversation=_turn(place, parent, episode),
        )
        return record, episode


def _turn(
    place: tuple[str, int] | None, parent: Thread | None, episode: Episode | None
) -> ConversationTurn | None:
    """A conversation turn's place and form (how the loop asked it; before an episode, how it was
    to be asked); None for a single question."""
    if place is None:
        return None
    form: str
    if episode is not None and episode.follow_up is not None:
        form = episode.follow_up
    elif episode is not None or parent is None:
        form = "standalone"
    else:
        form = "carried" if parent.carry else "continued"
    return ConversationTurn(place[0], place[1], form)


def _unreachable(record: EpisodeRecord) -> bool:
    """Whether the episode ended because no server answered (its engine's words say so)."""
    error = record.error
    return record.ended_by == "error" and isinstance(error, str) and error.startswith(UNREACHABLE)
