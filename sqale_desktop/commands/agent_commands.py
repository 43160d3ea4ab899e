"""``sqale-desktop ask``: one agent episode from the shell, the job of the model card's reference loop.

The episode loop is the same generator the app runs; this command only decides how to print its
events: ``--trace`` streams thinking, calls and results as they happen, ``--json`` prints the
finished episode, and the default prints the answer and its rows.  Ctrl-C stops the episode the way
the app's Stop button does (the episode's cancel flag) and still prints what there is.

Which engine, prompt, sampling, context, GPU layers, threads, row cap and query time limit are
decided by ``core.runtime`` from the app's settings, as in the window; flags override them.

Exit status: 0 an answer was found, 1 no answer / an engine or database error / cancelled,
2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sqale_desktop.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_db_argument
from sqale_desktop.commands.ctrl_c import on_ctrl_c
from sqale_desktop.commands.engine_flags import (
    add_engine_flags,
    add_settings_flags,
    engine_flags,
    settings_from,
)
from sqale_desktop.core.agent.events import (
    BudgetUpdated,
    Episode,
    EpisodeEnded,
    EpisodeStarted,
    Event,
    FinalAnswer,
    TextDelta,
    ToolCalled,
    ToolResulted,
    TurnStarted,
)
from sqale_desktop.core.agent.loop import EpisodeControl
from sqale_desktop.core.db.render import render_cell
from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.export_formats import json_text
from sqale_desktop.core.server_usage import usage_line

if TYPE_CHECKING:
    from sqale_desktop.core.agent.followup import Thread
    from sqale_desktop.core.history import History
    from sqale_desktop.core.runtime import Runtime
    from sqale_desktop.core.settings import Settings

PRINTED_ROWS = 20


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    ask = subparsers.add_parser(
        "ask",
        help="ask a question about a database; the agent answers with SQL",
        description="Run one agent episode: the model explores the database with its tools and "
        "answers with a SQL query, which is run read-only. Exit status: 0 an answer was found, "
        "1 no answer, an error or cancelled, 2 bad usage.",
    )
    add_db_argument(ask)
    ask.add_argument("--question", required=True, metavar="TEXT", help="the question, in plain language")
    add_engine_flags(ask, servers=False, replay_help="JSON list of completions, or a recorded episode")
    add_settings_flags(ask)
    ask.add_argument("--trace", action="store_true", help="print thinking, calls and results as they stream")
    ask.add_argument("--json", action="store_true", help="print the finished episode as JSON")
    ask.add_argument(
        "--follow-up",
        metavar="last|EPISODE_ID",
        type=_follow_up_ref,
        help="continue a stored answer's thread: 'last' (the database's latest answer) or an "
        "episode id; the question then sees the earlier questions, calls and SQL",
    )
    ask.add_argument(
        "--no-log",
        action="store_true",
        help="do not record the episode in the app's history (by default it joins the database's "
        "conversation, as a question asked in the window does)",
    )
    ask.set_defaults(handler=run_ask)


def run_ask(args: argparse.Namespace) -> int:
    from sqale_desktop.core.runtime import ChoiceError, close_engine

    settings = settings_from(args)
    try:
        runtime = _runtime(args, settings)
        assert runtime.factory is not None  # choose() raises otherwise
        engine = runtime.factory()
    except ChoiceError as exc:
        print(f"sqale-desktop ask: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KnownError as exc:  # the model or replay file cannot be read, the keyring refused
        print(f"sqale-desktop ask: {exc}", file=sys.stderr)
        return EXIT_FAILED
    try:
        from sqale_desktop.commands.db_commands import resolve_db

        db = runtime.open_database(resolve_db(args.db))
    except KnownError as exc:
        close_engine(engine)
        print(f"sqale-desktop ask: {exc}", file=sys.stderr)
        return EXIT_FAILED
    trace_out = sys.stderr if args.json else sys.stdout
    for note in runtime.protocol.notes:
        print(f"note: {note}", file=sys.stderr)
    parent_id, thread = None, None
    if args.follow_up is not None:
        try:
            parent_id, thread = _thread(args.follow_up, Path(args.db), runtime.thread_model)
        except KnownError as exc:  # no such answer, a damaged thread, another database or model
            db.close()
            close_engine(engine)
            print(f"sqale-desktop ask: --follow-up: {exc}", file=sys.stderr)
            return EXIT_USAGE
    log = (
        None
        if args.no_log
        else _HistoryLog.start(Path(args.db), args.question, parent_id, runtime.thread_model)
    )
    control = EpisodeControl()
    episode: Episode | None = None
    try:
        # Ctrl+C stops the episode like the app's Stop button: only a flag, the loop interrupts a
        # running query itself.
        with on_ctrl_c(control.cancel):
            warmed = runtime.warm_up(engine, control.event)
            if warmed is not None and warmed.note:
                print(f"note: {warmed.note}", file=sys.stderr)
            for event in runtime.episode(engine, db, args.question, control.event, parent=thread):
                if args.trace:
                    _trace(event, trace_out)
                if isinstance(event, EpisodeEnded):
                    episode = event.episode
    finally:
        db.close()
        close_engine(engine)
        if log is not None:
            log.finish(episode)
    assert episode is not None  # run_episode always ends with EpisodeEnded
    if args.json:
        print(json_text(episode.to_json()))
    else:
        _summary(episode, sys.stdout)
    if episode.error:
        print(f"sqale-desktop ask: {episode.error}", file=sys.stderr)
    return EXIT_OK if episode.sql and episode.ended_by not in ("cancelled", "error") else EXIT_FAILED


class _HistoryLog:
    """The question and its episode in the app's history, in the database's conversation (the
    ``llm`` CLI logs every prompt the same way), so the window lists them with its own.

    The question is committed as running before the episode starts, like the window's, so a
    killed ``ask`` leaves an interrupted entry.  History trouble never stops the question: it is
    said on stderr.
    """

    def __init__(self, history: History, entry_id: int) -> None:
        self._history = history
        self._entry_id = entry_id

    @classmethod
    def start(
        cls, db_path: Path, question: str, parent_id: int | None = None, model: str | None = None
    ) -> _HistoryLog | None:
        from sqale_desktop.core.history import History, fingerprint

        try:
            history = History()
            conversation = history.conversation_for(db_path, title=db_path.name)
            entry_id = history.add_question(
                conversation.id,
                question,
                parent_entry_id=parent_id,
                db_fingerprint=fingerprint(db_path),
                model=model,
            )
        except Exception as exc:  # an unusable history file, text SQLite cannot store
            print(f"note: the history does not record this question: {exc}", file=sys.stderr)
            return None
        print(f"note: episode {entry_id} (follow it up with --follow-up {entry_id})", file=sys.stderr)
        return cls(history, entry_id)

    def finish(self, episode: Episode | None) -> None:
        """Store the finished episode; ``None`` (a bug ended the loop) leaves the entry running,
        to be marked interrupted by the next start, as a crash in the window is."""
        if episode is None:
            return
        try:
            self._history.finish_episode(self._entry_id, episode)
        except Exception as exc:
            print(f"note: the history could not store this episode: {exc}", file=sys.stderr)


def _runtime(args: argparse.Namespace, settings: Settings) -> Runtime:
    """``core.runtime.choose`` for the flags: the engine they name, else the settings' one."""
    from sqale_desktop.core.runtime import choose

    return choose(settings, engine_flags(args))


def _follow_up_ref(text: str) -> int | str:
    if text == "last":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'last' or an episode id, not {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"an episode id is above 0: {text}")
    return value


def _thread(ref: int | str, db_path: Path, model: str) -> tuple[int, Thread]:
    """The stored answer ``ref`` names ('last' or an id) and its thread, checked for this
    database and model; :class:`~sqale_desktop.core.errors.KnownError` says what is wrong."""
    from sqale_desktop.core.agent.followup import ThreadError
    from sqale_desktop.core.history import History

    history = History()
    if ref == "last":
        entry = history.last_answer(db_path)
        if entry is None:
            raise ThreadError(f"no finished answer about {db_path.name} in the history to follow up")
        entry_id = entry.id
    else:
        entry_id = int(ref)
    return entry_id, history.thread(entry_id, db_path, model)


def _trace(event: Event, out: TextIO) -> None:
    if isinstance(event, EpisodeStarted):
        out.write(f"engine: {event.engine}; prompt: {event.protocol.prompt_source}\n")
        if event.follow_up is not None:
            note = f" ({event.follow_up_note})" if event.follow_up_note else ""
            out.write(f"follow-up: {event.follow_up}{note}\n")
    elif isinstance(event, TurnStarted):
        label = (
            "final turn" if event.final else f"turn {event.turn} ({event.tool_turns_left} tool turns left)"
        )
        out.write(f"\n── {label} ──\n")
    elif isinstance(event, TextDelta):
        out.write(event.text)
    elif isinstance(event, ToolCalled):
        out.write(f"\n→ {event.tool} {json.dumps(event.args, ensure_ascii=False)}\n")
    elif isinstance(event, ToolResulted):
        status = "ok" if event.ok else "error"
        out.write(f"← {event.tool} {status} ({event.seconds:.3f} s)\n")
        out.write("".join(f"  {line}\n" for line in event.output.splitlines() or [""]))
    elif isinstance(event, BudgetUpdated):
        out.write(f"{event.message}\n")
    elif isinstance(event, FinalAnswer):
        out.write(f"\n── answer: {event.ended_by} ──\n")
    out.flush()


def _summary(episode: Episode, out: TextIO) -> None:
    stats = episode.stats
    if episode.follow_up == "continued":
        out.write(f"follow-up: continued the thread ({stats.thread_tokens} tokens)\n")
    elif episode.follow_up == "carried":
        out.write("follow-up: carried (the earlier questions and their SQL as text, in a new episode)\n")
    out.write(f"ended by: {episode.ended_by}\n")
    if episode.sql:
        out.write(f"sql: {episode.sql}\n")
    result = episode.result
    if result is not None:
        if result.error:
            out.write(f"error: {result.error}\n")
        else:
            out.write(" | ".join(result.columns) + "\n")
            for row in result.rows[:PRINTED_ROWS]:
                out.write(" | ".join(render_cell(v, max_chars=sys.maxsize) for v in row) + "\n")
            more = result.truncated or len(result.rows) > PRINTED_ROWS
            rows = f"{result.row_count} row{'' if result.row_count == 1 else 's'}"
            out.write(f"({rows}{', more not shown' if more else ''})\n")
    out.write(
        f"{len(episode.turns)} turns, {stats.completion_tokens} tokens generated, "
        f"{stats.prompt_tokens} in the prompt, {stats.seconds:.1f} s\n"
    )
    billed = usage_line(stats.server_usage)
    if billed:  # what the server reported, at the configured prices (``--json``: stats.server_usage)
        out.write(f"server: {billed}\n")
