"""The episode loop: a plain generator of typed events, the same for the CLI, the Qt worker and tests.

One raw ChatML prompt per episode, only ever appended to: system and user turns, then for each
turn the assistant opener, the completion exactly as sampled (its think block included) closed by
the engine's ``end_turn()``, and the tool results as the next user turn.  Nothing is ever rebuilt
from a message list.

Budgets as in training: ``tool_turns`` tool turns (6), then one final turn in which the model must
answer; ``max_query_errors`` (4) failed ``run_query`` calls in a row end the exploration early.
Before the final turn the budget line is replaced by the exploration-limit message, quoting the
last query that ran without error.  Tokens: 2,048 per tool turn, 3,072 for the final turn; once the
episode prompt (estimated with the pending tool results) reaches 12,288 tokens the next turn is the
final one, which then uses the headroom of the 16,384-token context.

Ending: ``submit_sql`` ends the episode (calls after it in the same turn are not run); a final
answer (a ``submit_sql`` call, a fenced block or bare SQL) that is empty or does not execute falls
back to the last query that ran without error, and so does a submitted query that does not
execute (training ended the episode there too; the fallback gives the user a working answer).
The chosen query is run once more, read-only, and its rows are the episode's ``result``.

Tool time: the calls of one turn share ``turn_tool_seconds`` (30 s) of wall-clock time.  A call
still running when it is spent is stopped (its query interrupted), and the calls after it are not
run; the model reads why for each, so it can ask again next turn.  ``submit_sql`` always runs.
Normal calls take milliseconds, so normal episodes never meet this budget.

Events state what happened, so no face re-derives it: :class:`EpisodeStarted` carries the
protocol in force (budgets fitted to the engine), each :class:`TurnFinished` the finish reason,
the turn's token allowance, the budget that cut it (its own or the episode's) and whether a tool
turn held no tool call; the turn's record keeps the same facts for a restored episode.

Cancelling: set ``cancel`` (or call :meth:`EpisodeControl.cancel`) — the one way to stop an
episode, for the window's Stop, the CLI's Ctrl-C and the evaluation alike.  The engine checks it
between tokens, the loop before each tool call and after each query, and the loop's own query
watcher interrupts a query that is running when it is set, so nobody else interrupts the database.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqale_desktop.core.agent.chat_template import assistant_opener, opener_starts_thinking
from sqale_desktop.core.agent.events import (
    BudgetUpdated,
    CallRecord,
    CutBy,
    EndedBy,
    Episode,
    EpisodeEnded,
    EpisodeStarted,
    EpisodeStats,
    Event,
    FinalAnswer,
    QueryResultData,
    TextDelta,
    ToolCalled,
    ToolResulted,
    TurnFinished,
    TurnRecord,
    TurnStarted,
)
from sqale_desktop.core.agent.followup import Thread, open_follow_up
from sqale_desktop.core.agent.parser import ParsedCall, extract_final_sql, parse_completion, split_think
from sqale_desktop.core.agent.phases import PhaseSplitter
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.engines.base import Engine, EngineSession, valid_text
from sqale_desktop.core.engines.text_session import count_tokens
from sqale_desktop.core.errors import is_known
from sqale_desktop.core.tools.payloads import RowsPayload, SubmittedPayload

_log = logging.getLogger(__name__)

NO_CALL_MESSAGE = (
    'Error: no tool call found. After your reasoning, reply with a JSON object {"tool": "<name>", '
    '"args": {...}}.'
)
SUBMITTED_MESSAGE = "SQL submitted."
RESULT_ROWS = 1000
DEFAULT_TURN_TOOL_SECONDS = 30.0


def skipped_call_message(budget_s: float) -> str:
    """What the model reads for a call not run because the turn's tool time was spent."""
    return (
        f"Error: not run: the tool calls of this turn used up their {budget_s:g} s time budget. "
        "Call it again in your next turn if you still need it."
    )


def stopped_call_message(budget_s: float) -> str:
    """What the model reads for a call stopped when the turn's tool time ran out under it."""
    return (
        f"Error: stopped: the tool calls of this turn ran past their {budget_s:g} s time budget. "
        "Try a cheaper query (add a LIMIT or a WHERE) in your next turn."
    )


_WATCH_S = 0.02  # how often a running query checks the Stop flag (through a watcher thread)


class ToolOutputLike(Protocol):
    """What a tool returns (``core.tools.ToolOutput``): the text the model sees, success, a payload."""

    @property
    def text(self) -> str: ...

    @property
    def ok(self) -> bool: ...

    @property
    def payload(self) -> Any: ...


class ToolRunner(Protocol):
    """The tool box (``core.tools.ToolBox``); must not raise for conditions of the world."""

    def call(self, name: str, args: dict[str, Any]) -> ToolOutputLike: ...


class RowsLike(Protocol):
    columns: list[str]
    rows: list[tuple[Any, ...]]
    row_count: int
    truncated: bool


class EpisodeDatabase(Protocol):
    """The read-only database (``core.db.ReadOnlyDatabase``): rerunning the answer, interrupting."""

    def execute(self, sql: str, max_rows: int = ...) -> Any: ...

    def interrupt(self) -> None: ...


@dataclass
class EpisodeControl:
    """A handle to stop a running episode from another thread (pass ``event`` as ``cancel``).

    ``cancel()`` only sets the flag: generation stops at the next token, and a query that is
    running is interrupted within milliseconds by the loop's watcher (:class:`_QueryStopper`),
    rather than at its time limit.  Setting the flag is safe from any thread, a signal handler
    included, since nothing here takes the database's lock.
    """

    event: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        self.event.set()

    @property
    def cancelled(self) -> bool:
        return self.event.is_set()


class _Cancelled(Exception):
    """Raised inside the loop to unwind to the single place that ends a cancelled episode."""


def run_episode(
    question: str,
    db: EpisodeDatabase,
    toolbox: ToolRunner,
    engine: Engine,
    protocol: AgentProtocol | None = None,
    *,
    cancel: threading.Event | None = None,
    db_label: str | None = None,
    result_rows: int = RESULT_ROWS,
    clock: Callable[[], float] = time.perf_counter,
    turn_tool_seconds: float = DEFAULT_TURN_TOOL_SECONDS,
    parent: Thread | None = None,
) -> Iterator[Event]:
    """Run one episode, yielding its events; the last one is always :class:`EpisodeEnded`.

    ``parent``: the thread a follow-up question continues (``core.agent.followup``); the
    episode then continues it or carries it, and says which in :class:`EpisodeStarted` and
    ``episode.follow_up``.  Without it, the episode is the trained standalone one.

    Never raises for known conditions: an engine or tool failure ends the episode with
    ``ended_by="error"`` and the message in ``episode.error`` (bugs are also logged with their
    traceback).  Closing the generator early closes the engine session.  ``turn_tool_seconds``:
    the wall-clock budget of one turn's tool calls (see the module docstring).
    """
    if not turn_tool_seconds > 0:
        raise ValueError("turn_tool_seconds must be positive")
    protocol = protocol or AgentProtocol()
    question = valid_text(question)  # it may come from a command line holding undecodable bytes
    cancel = cancel or threading.Event()
    label = valid_text(db_label if db_label is not None else str(getattr(db, "path", "")))
    episode = Episode(question=question, db=label, prompt_source=protocol.prompt_source)
    started = clock()
    session: EngineSession | None = None
    stopper = _QueryStopper(db, cancel)
    try:
        base_tokens, context_tokens = 0, None
        if parent is None:
            yield EpisodeStarted(protocol=protocol, engine=engine.describe())
            opener = protocol.assistant_opener or assistant_opener(engine.chat_template())
            session = engine.new_session(protocol.prompt_head(question) + opener)
        else:
            opener = protocol.assistant_opener or assistant_opener(engine.chat_template())
            start = open_follow_up(engine, protocol, opener, question, parent)
            session = start.session
            episode.follow_up = start.form
            episode.earlier_questions, episode.earlier_sqls = list(parent.questions), list(parent.sqls)
            episode.stats.thread_tokens = start.thread_tokens
            base_tokens, context_tokens = start.thread_tokens, start.context_tokens
            yield EpisodeStarted(
                protocol=protocol, engine=engine.describe(), follow_up=start.form, follow_up_note=start.note
            )
        run = _Run(db, toolbox, session, protocol, opener, cancel, episode, result_rows, clock, stopper)
        run.base_tokens, run.context_tokens = base_tokens, context_tokens
        run.turn_tool_seconds = turn_tool_seconds
        yield from run.turns()
    except _Cancelled:
        episode.ended_by, episode.sql, episode.result = "cancelled", None, None
    except Exception as exc:
        if is_known(exc):
            _log.info("episode ended by an error: %s", exc)  # the message says it all: no traceback
        else:
            _log.exception("episode failed")
        episode.ended_by, episode.error = "error", str(exc) or type(exc).__name__
    finally:
        stopper.finish()
        if session is not None:
            episode.prompt = session.prompt_text
            stats = session.stats
            episode.stats = EpisodeStats(
                prompt_tokens=stats.prompt_tokens,
                completion_tokens=stats.completion_tokens,
                evaluated_tokens=stats.evaluated_tokens,
                seconds=clock() - started,
                engine=engine.describe(),
                server_usage=copy.deepcopy(stats.server_usage),
                thread_tokens=episode.stats.thread_tokens,
            )
            session.close()
    if episode.ended_by in ("cancelled", "error"):
        yield FinalAnswer(sql="", ended_by=episode.ended_by)
    yield EpisodeEnded(episode)


@dataclass
class _Run:
    """One episode in progress: what it runs on, and the budget state it keeps."""

    db: EpisodeDatabase
    toolbox: ToolRunner
    session: EngineSession
    protocol: AgentProtocol
    opener: str
    cancel: threading.Event
    episode: Episode
    result_rows: int
    clock: Callable[[], float]
    stopper: _QueryStopper
    turn_tool_seconds: float = DEFAULT_TURN_TOOL_SECONDS
    # A continued follow-up: its budgets count from the end of the thread (``base_tokens``), in
    # what is left of the context after it (``context_tokens``); 0 / None for a standalone episode.
    base_tokens: int = 0
    context_tokens: int | None = None
    tool_turns_used: int = 0
    consecutive_query_errors: int = 0
    last_working_sql: str | None = None

    @property
    def starts_in_think(self) -> bool:
        return opener_starts_thinking(self.opener)

    def turns(self) -> Iterator[Event]:
        protocol, session = self.protocol, self.session
        final = False
        turn = 0
        context = protocol.context_tokens if self.context_tokens is None else self.context_tokens
        while True:
            turn += 1
            if not final and session.stats.prompt_tokens - self.base_tokens >= protocol.episode_tokens:
                final = True  # the estimate below fell short: the budget is spent, answer now
            tool_turns_left = 0 if final else protocol.tool_turns - self.tool_turns_used
            yield TurnStarted(turn=turn, final=final, tool_turns_left=tool_turns_left)
            used = session.stats.prompt_tokens - self.base_tokens
            if final:
                own, left = protocol.final_turn_tokens, context - used
            else:
                own, left = protocol.tool_turn_tokens, protocol.episode_tokens - used
            record, calls = yield from self.generate(
                turn, max(0, min(own, left)), "turn" if own <= left else "episode", final
            )
            self.check_cancel()
            if final:
                _, answer, _ = split_think(record.completion, self.starts_in_think)
                yield from self.finish_final(extract_final_sql(answer))
                return
            outputs: list[str] = []
            submitted = yield from self.run_calls(turn, record, calls, outputs)
            if submitted is not None:
                sql, result = submitted
                if result.error is None:
                    self.end(sql, result, "submit_sql")
                    yield FinalAnswer(sql=sql, ended_by="submit_sql")
                else:
                    yield from self.fall_back()
                return
            self.tool_turns_used += 1
            left = protocol.tool_turns - self.tool_turns_used
            results = "\n\n".join(f"{protocol.tool_result_prefix} {output}" for output in outputs)
            # the results are not in the prompt yet; an estimate of their size decides in time
            tokens_after = session.stats.prompt_tokens - self.base_tokens + count_tokens(results)
            final = (
                left <= 0
                or self.consecutive_query_errors >= protocol.max_query_errors
                or tokens_after >= protocol.episode_tokens
            )
            message = (
                protocol.exploration_limit_message(self.last_working_sql)
                if final
                else protocol.budget_line(left)
            )
            yield BudgetUpdated(
                tool_turns_left=max(left, 0),
                consecutive_query_errors=self.consecutive_query_errors,
                episode_tokens=tokens_after,
                message=message,
            )
            session.append(f"\n<|im_start|>user\n{results}\n\n{message}<|im_end|>\n{self.opener}")

    def check_cancel(self) -> None:
        if self.cancel.is_set():
            raise _Cancelled

    def generate(
        self, turn: int, max_tokens: int, budget: CutBy, final: bool
    ) -> Generator[Event, None, tuple[TurnRecord, list[ParsedCall]]]:
        """Stream one completion into a new :class:`TurnRecord` (kept even if the engine fails).

        ``budget`` names the budget that set ``max_tokens``.  Returns the record and, for a tool
        turn, its parsed calls; :class:`TurnFinished` says how the turn ended.
        """
        session, cancel, clock = self.session, self.cancel, self.clock
        record = TurnRecord(completion="", final=final, max_tokens=max_tokens)
        self.episode.turns.append(record)
        splitter = PhaseSplitter(self.starts_in_think)
        parts: list[str] = []
        tokens_before = session.stats.completion_tokens
        drafted_before, accepted_before = session.stats.drafted_tokens, session.stats.accepted_tokens
        started = clock()
        stream = session.generate(max_tokens, self.protocol.sampling, cancel)
        try:
            try:
                for delta in stream:
                    parts.append(delta)
                    for text, phase in splitter.feed(delta):
                        yield TextDelta(turn=turn, text=text, phase=phase, tokens=count_tokens(text))
                    if cancel.is_set():
                        break
            finally:
                if isinstance(stream, Generator):
                    stream.close()  # let the engine finish its bookkeeping now, not when collected
            for text, phase in splitter.flush():
                yield TextDelta(turn=turn, text=text, phase=phase, tokens=count_tokens(text))
            record.finish_reason = "cancelled" if cancel.is_set() else session.last_finish_reason
        except BaseException:
            record.finish_reason = "error"
            raise
        finally:
            session.end_turn()
            record.completion = "".join(parts)
            record.seconds = clock() - started
            record.completion_tokens = session.stats.completion_tokens - tokens_before
        calls = [] if final else parse_completion(record.completion, self.starts_in_think).calls
        record.cut_by = budget if record.finish_reason == "length" else None
        record.no_tool_call = not final and not calls and record.finish_reason != "cancelled"
        seconds = record.seconds
        yield TurnFinished(
            turn=turn,
            completion_tokens=record.completion_tokens,
            seconds=seconds,
            tokens_per_second=record.completion_tokens / seconds if seconds > 0 else 0.0,
            drafted_tokens=session.stats.drafted_tokens - drafted_before,
            accepted_tokens=session.stats.accepted_tokens - accepted_before,
            finish_reason=record.finish_reason,
            max_tokens=max_tokens,
            cut_by=record.cut_by,
            no_tool_call=record.no_tool_call,
        )
        return record, calls

    def run_calls(
        self, turn: int, record: TurnRecord, calls: list[ParsedCall], outputs: list[str]
    ) -> Generator[Event, None, tuple[str, QueryResultData] | None]:
        """Execute the parsed calls of a tool turn in order, up to a ``submit_sql``.

        Returns the submitted SQL and its result (rerun here, read-only), or ``None``.
        """
        if not calls:
            outputs.append(NO_CALL_MESSAGE)
            return None
        budget_ends = time.monotonic() + self.turn_tool_seconds
        for index, call in enumerate(calls):
            self.check_cancel()
            yield ToolCalled(turn=turn, index=index, tool=call.tool, args=dict(call.args))
            self.check_cancel()  # the consumer may have stopped the episode on seeing the call
            started = self.clock()
            payload: Any = None
            submitted: tuple[str, QueryResultData] | None = None
            over_budget = False
            if call.error is not None:
                text, ok = f"Error: {call.error}", False
            elif call.tool != "submit_sql" and time.monotonic() >= budget_ends:
                text, ok, over_budget = skipped_call_message(self.turn_tool_seconds), False, True
            elif call.tool == "submit_sql":
                sql = str(call.args["sql"])
                result = self.rerun(sql)
                submitted = (sql, result)
                ok = result.error is None
                text = SUBMITTED_MESSAGE if ok else f"Error: {result.error}"
                payload = _submitted_payload(sql, result) if ok else None
            else:
                with self.stopper.running(budget_ends) as watch:
                    output = self.toolbox.call(call.tool, dict(call.args))
                text, ok, payload = output.text, output.ok, output.payload
                # a call that finished despite the interrupt keeps its result
                if watch.deadline_hit and not ok and not self.cancel.is_set():
                    text, ok, payload = stopped_call_message(self.turn_tool_seconds), False, None
                    over_budget = True
            seconds = self.clock() - started
            self.check_cancel()
            record.calls.append(
                CallRecord(tool=call.tool, args=dict(call.args), output=text, ok=ok, seconds=seconds)
            )
            yield ToolResulted(
                turn=turn, index=index, tool=call.tool, output=text, ok=ok, seconds=seconds, payload=payload
            )
            outputs.append(text)
            if call.tool == "run_query" and not over_budget:
                if ok:
                    self.consecutive_query_errors = 0
                    self.last_working_sql = str(call.args["sql"])
                else:
                    self.consecutive_query_errors += 1
            if submitted is not None:
                return submitted
        return None

    def finish_final(self, answer_sql: str | None) -> Iterator[Event]:
        if answer_sql:
            result = self.rerun(answer_sql)
            if result.error is None:
                self.end(answer_sql, result, "final_turn")
                yield FinalAnswer(sql=answer_sql, ended_by="final_turn")
                return
        yield from self.fall_back()

    def fall_back(self) -> Iterator[Event]:
        """The answer failed: use the last query that ran without error, if there is one."""
        sql = self.last_working_sql
        if sql is None:
            self.episode.sql, self.episode.result, self.episode.ended_by = None, None, "no_answer"
            yield FinalAnswer(sql="", ended_by="no_answer")
            return
        self.end(sql, self.rerun(sql), "fallback_to_last_working_query")
        yield FinalAnswer(sql=sql, ended_by="fallback_to_last_working_query")

    def end(self, sql: str, result: QueryResultData, ended_by: EndedBy) -> None:
        self.episode.sql, self.episode.result, self.episode.ended_by = sql, result, ended_by

    def rerun(self, sql: str) -> QueryResultData:
        """Run the answer once more, read-only; a failure is recorded in ``error``, never raised."""
        self.check_cancel()
        try:
            with self.stopper.running():
                rows: RowsLike = self.db.execute(sql, max_rows=self.result_rows)
        except Exception as exc:
            self.check_cancel()
            if not _is_known_db_error(exc):
                raise
            return QueryResultData(error=str(exc) or type(exc).__name__)
        self.check_cancel()
        return QueryResultData(
            columns=list(rows.columns),
            rows=[list(row) for row in rows.rows],
            row_count=rows.row_count,
            truncated=rows.truncated,
        )


class _QueryStopper:
    """Interrupts the episode's running query as soon as ``cancel`` is set.

    Whoever stops the episode may only set the flag, or may interrupt the database a moment before
    a statement starts (which does not stop it); one watcher thread per episode keeps interrupting
    while the flag is set and a query runs, so a Stop takes effect within ``_WATCH_S`` either way.
    """

    def __init__(self, db: EpisodeDatabase, cancel: threading.Event) -> None:
        self._db = db
        self._cancel = cancel
        self._active = threading.Event()
        self._finished = threading.Event()
        self._thread: threading.Thread | None = None
        self._current: _Watch | None = None

    @contextmanager
    def running(self, deadline: float | None = None) -> Iterator[_Watch]:
        """Mark a query as running for the duration of the ``with`` block.

        ``deadline`` (``time.monotonic()``): interrupt the query then too; the yielded watch's
        ``deadline_hit`` says afterwards whether that happened.
        """
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="episode-interrupt", daemon=True)
            self._thread.start()
        watch = _Watch(deadline)
        self._current = watch
        self._active.set()
        try:
            yield watch
        finally:
            self._active.clear()
            self._current = None

    def finish(self) -> None:
        """The episode is over: the watcher thread ends within ``_WATCH_S``."""
        self._finished.set()

    def _watch(self) -> None:
        while not self._finished.is_set():
            cancelled = self._cancel.wait(_WATCH_S)
            watch = self._current
            late = watch is not None and watch.deadline is not None and time.monotonic() >= watch.deadline
            if (cancelled or late) and self._active.is_set():
                if late and watch is not None:
                    watch.deadline_hit = True
                # a late interrupt() stops nothing: it only affects statements already running
                self._db.interrupt()
                self._finished.wait(_WATCH_S)


@dataclass
class _Watch:
    """One watched query: its deadline, and whether the watcher stopped it for passing it."""

    deadline: float | None
    deadline_hit: bool = False


def _submitted_payload(sql: str, result: QueryResultData) -> SubmittedPayload:
    """The tool box's own payload for a submission, so result cards render it like any other."""
    rows = RowsPayload(
        result.columns, [tuple(row) for row in result.rows], result.row_count, result.truncated
    )
    return SubmittedPayload(sql, rows)


def _is_known_db_error(exc: Exception) -> bool:
    """The database's own conditions (locked, interrupted, no such table) on the answer's re-run.

    They are recorded as the answer's error; anything else there propagates.  Narrower than
    :func:`~sqale_desktop.core.errors.is_known` on purpose: an engine error cannot happen in a query.
    """
    import sqlite3

    from sqale_desktop.core.db.errors import DatabaseError

    return isinstance(exc, DatabaseError | sqlite3.Error)
