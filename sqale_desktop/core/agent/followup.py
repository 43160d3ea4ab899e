"""Follow-up questions: the thread a finished episode leaves, and the two ways to continue it.

A follow-up is asked on a :class:`Thread`: the exact prompt string a finished episode ended with
(completions and their think blocks included), the questions asked along it and the SQL that
answered each.  The episode loop continues it in one of two forms, and says which:

``continued``
    The new question is appended to the thread's prompt as one more user turn, in the trained
    user template, followed by the assistant opener (:func:`continued_turn`).  Nothing before it
    changes, so an engine that still holds the thread evaluates only the new tokens.  The new
    question gets fresh budgets: its tool turns, its error cap, and an episode budget counted from
    the end of the thread.

``carried``
    When the thread plus one question's whole budget (:func:`question_budget`: the episode's
    tokens and the final turn's) would not fit the engine's context, the follow-up is a fresh,
    standalone episode whose question carries the earlier questions and their final SQL as text
    (:func:`carried_question`, the one documented form below).  Nothing of the thread is cut: the
    model reads every earlier question, and the tables it explored it explores again.

The carried form, exactly::

    Earlier questions in this conversation, each with the SQL query that answered it:

    1. <question 1>
    SQL: <its final SQL, or "(no answer)">

    2. ...

    Follow-up question: <the new question>

Prefetch: while the person types a follow-up, :func:`prefetch_follow_up` has an engine that can
(the llama engine's ``prefetch_continuation``) evaluate the thread and the fixed start of the
continued turn (:func:`continued_prefix`, everything before the question's text).  It changes
nothing that is evaluated or generated: the follow-up's prompt is built as without it, and the
engine's memory then already holds a prefix of it.

A plain question (no thread) never comes here: its prompt is the trained standalone episode.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from sqale_desktop.core.agent.events import Episode, FollowUpForm
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.engines.base import Engine, EngineSession
from sqale_desktop.core.errors import KnownError

__all__ = [
    "FollowUpForm",
    "Thread",
    "ThreadError",
    "carried_question",
    "continued_prefix",
    "continued_turn",
    "prefetch_follow_up",
]

FORMS: tuple[FollowUpForm, ...] = ("continued", "carried")

CARRIED_HEADER = "Earlier questions in this conversation, each with the SQL query that answered it:"
CARRIED_QUESTION = "Follow-up question:"
NO_ANSWER = "(no answer)"
_THREAD_START = "<|im_start|>system\n"
_THREAD_END = "<|im_end|>"
# Stands for the question while finding where it begins in the turn (a private-use character).
_QUESTION_MARK = "\ue000"

_log = logging.getLogger(__name__)


class ThreadError(KnownError):
    """A thread that cannot be followed up (an unfinished episode, a damaged stored thread)."""


@dataclass(frozen=True)
class Thread:
    """What a follow-up continues: a finished episode's final prompt, its questions and their SQL.

    ``questions`` and ``sqls`` run in the order asked, the finished episode's own last; ``db`` is
    the database label the thread was asked on (empty when unknown).  ``carry``: ask the
    follow-up in the carried form even where the thread fits (the evaluation's ``carried``
    condition compares the two forms on the same questions).
    """

    prompt: str
    questions: tuple[str, ...]
    sqls: tuple[str | None, ...]
    db: str = ""
    carry: bool = False

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem:
            raise ThreadError(f"this thread cannot be followed up: {problem}")

    @classmethod
    def of(cls, episode: Episode, *, carry: bool = False) -> Thread:
        """The thread ``episode`` ended; :class:`ThreadError` for a stopped or failed one."""
        if episode.ended_by in ("cancelled", "error"):
            reason = "was stopped" if episode.ended_by == "cancelled" else "ended in an error"
            raise ThreadError(f"that answer {reason}: follow up on a finished answer instead")
        questions = (*episode.earlier_questions, episode.question)
        sqls = (*episode.earlier_sqls, episode.sql)
        return cls(episode.prompt, questions, sqls, episode.db, carry)


def can_follow_up(episode: Episode) -> bool:
    """Whether ``episode`` ends a thread a follow-up can continue (:meth:`Thread.of`'s rules)."""
    try:
        Thread.of(episode)
    except ThreadError:
        return False
    return True


def _problem(thread: Thread) -> str:
    if not thread.questions:
        return "it holds no question"
    if len(thread.questions) != len(thread.sqls):
        return f"it holds {len(thread.questions)} questions but {len(thread.sqls)} answers"
    if not thread.prompt.startswith(_THREAD_START) or not thread.prompt.endswith(_THREAD_END):
        return "its prompt is not a finished episode's (it must start with the system turn and end a turn)"
    return ""


def continued_turn(protocol: AgentProtocol, question: str, opener: str) -> str:
    """What a continued follow-up appends to the thread: the user turn and the assistant opener.

    The thread ends with ``<|im_end|>``, and the turn begins with a newline, exactly as the loop
    appends tool results.
    """
    return f"\n<|im_start|>user\n{protocol.user_text(question)}<|im_end|>\n{opener}"


def continued_prefix(protocol: AgentProtocol, opener: str) -> str:
    """The text every continued turn (:func:`continued_turn`) starts with, up to where the question's
    text begins; the whole turn's start is derived from that function, so the two never differ.
    Empty when the user template does not hold the question."""
    head, found, _ = continued_turn(protocol, _QUESTION_MARK, opener).partition(_QUESTION_MARK)
    return head if found else ""


def prefetch_follow_up(
    engine: Engine, protocol: AgentProtocol, opener: str, thread: Thread, cancel: threading.Event
) -> int:
    """Evaluate ahead what a continued follow-up to ``thread`` will start with; the tokens evaluated.

    For an engine that keeps state (``prefetch_continuation``: the llama engine); 0 for the others
    and for a thread asked in the carried form.  The follow-up itself is unchanged
    (:func:`open_follow_up` builds the same prompt): it only finds more of it evaluated.
    ``cancel`` stops it (a standalone question, another thread, Stop).
    """
    prefetch = getattr(engine, "prefetch_continuation", None)
    if thread.carry or not callable(prefetch):
        return 0
    head = continued_prefix(protocol, opener)
    return int(prefetch(thread.prompt, head, cancel))


def carried_question(thread: Thread, question: str) -> str:
    """The question of a carried follow-up: the earlier questions and their SQL, then the new one."""
    parts = [CARRIED_HEADER]
    for number, (earlier, sql) in enumerate(zip(thread.questions, thread.sqls, strict=True), start=1):
        parts.append(f"{number}. {earlier}\nSQL: {sql or NO_ANSWER}")
    parts.append(f"{CARRIED_QUESTION} {question}")
    return "\n\n".join(parts)


def question_budget(protocol: AgentProtocol) -> int:
    """The most tokens one question may add: its episode budget, then its final turn."""
    return protocol.episode_tokens + protocol.final_turn_tokens


def engine_context(engine: object, protocol: AgentProtocol) -> int:
    """The context the engine was given (``n_ctx``), or the protocol's where the engine does not
    say (a server): the conservative guess, since a thread that outgrows it is carried, not cut."""
    n_ctx = getattr(engine, "n_ctx", None)
    return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else protocol.context_tokens


def fits(thread_tokens: int, protocol: AgentProtocol, context: int) -> bool:
    """Whether a question's whole budget fits after ``thread_tokens`` (the thread and its new turn)."""
    return thread_tokens + question_budget(protocol) <= context


@dataclass
class FollowUpStart:
    """How :func:`open_follow_up` started a follow-up: the session, its form, and its budgets.

    ``thread_tokens``: a continued follow-up's thread length (its budgets count from there), 0
    when carried; ``context_tokens``: what is left for the question after the thread (None:
    the protocol's own); ``note``: why it was carried, for the card and the log.
    """

    session: EngineSession
    form: FollowUpForm
    thread_tokens: int = 0
    context_tokens: int | None = None
    note: str = ""


def open_follow_up(
    engine: Engine, protocol: AgentProtocol, opener: str, question: str, thread: Thread
) -> FollowUpStart:
    """Start the session of a follow-up to ``thread``: continued where it fits, else carried.

    The continued session is built first (cheap: nothing is evaluated until the first turn) so
    the decision uses the engine's own token count of the thread and the new turn.
    """
    if thread.carry:
        carried = engine.new_session(protocol.prompt_head(carried_question(thread, question)) + opener)
        return FollowUpStart(carried, "carried", note="asked in the carried form, as requested")
    context = engine_context(engine, protocol)
    session = continue_session(engine, thread.prompt)
    try:
        thread_tokens = session.stats.prompt_tokens
        session.append(continued_turn(protocol, question, opener))
        if fits(session.stats.prompt_tokens, protocol, context):
            room = min(protocol.context_tokens, context - thread_tokens)
            return FollowUpStart(session, "continued", thread_tokens, room)
    except BaseException:
        session.close()
        raise
    session.close()
    note = (
        f"the thread ({thread_tokens:,} tokens) and one question's budget "
        f"({question_budget(protocol):,} tokens) exceed the context ({context:,} tokens): "
        f"the earlier {'question and its' if len(thread.questions) == 1 else 'questions and their'} "
        "SQL are carried as text in a new episode"
    )
    _log.info("follow-up carried: %s", note)
    carried = engine.new_session(protocol.prompt_head(carried_question(thread, question)) + opener)
    return FollowUpStart(carried, "carried", note=note)


def continue_session(engine: Engine, prompt: str) -> EngineSession:
    """A session holding exactly ``prompt``, reusing what the engine still holds of it.

    Engines that keep state (``base.Continues``: the llama engine) continue from the thread's
    exact token ids; the others open a session over the text, which is the same prompt.
    """
    resume = getattr(engine, "continue_session", None)
    if callable(resume):
        session: EngineSession = resume(prompt)
        return session
    return engine.new_session(prompt)
