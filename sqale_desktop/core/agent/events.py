"""Typed events of an episode and the finished episode itself.

The episode loop is a generator of these events (like llm's agent loop): the CLI prints them, the
window's agent worker appends them to a queue that the UI thread drains on a timer (not one Qt
signal per event: see ``ui/agent_runner.py``), tests collect them.  Everything here is plain data,
and every fact a face shows is in an event (GPT4All's chat view draws its items' roles, it never
re-derives them): the protocol in force, why a turn ended, a turn without a tool call.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.server_usage import ServerUsage

EndedBy = Literal[
    "submit_sql", "final_turn", "fallback_to_last_working_query", "no_answer", "cancelled", "error"
]
Phase = Literal["think", "answer"]
FollowUpForm = Literal["continued", "carried"]
"""How a follow-up continued its thread (see ``core.agent.followup``)."""
CutBy = Literal["turn", "episode"]
"""Which token budget ended a turn: the turn's own (2,048 for a tool turn, 3,072 for the final
one) or what was left of the episode's (12,288 tokens before the final turn, then the context)."""


@dataclass(frozen=True)
class EpisodeStarted:
    """The first event: the protocol in force (budgets fitted to the engine's context, prompt
    strings, sampling) and where the episode runs, so no face needs a protocol of its own."""

    protocol: AgentProtocol
    engine: str
    # A follow-up question (``core.agent.followup``): "continued" or "carried"; None for a plain one.
    follow_up: FollowUpForm | None = None
    # Why a follow-up was carried rather than continued (the thread outgrew the context).
    follow_up_note: str = ""


@dataclass(frozen=True)
class TurnStarted:
    turn: int  # 1-based
    final: bool  # the final turn, in which the model must answer
    tool_turns_left: int


@dataclass(frozen=True)
class TextDelta:
    turn: int
    text: str
    phase: Phase
    # estimated tokens in ``text`` (words and punctuation): the live rate while a turn streams,
    # for engines that count their tokens only once the turn is over (a server)
    tokens: int = 0


@dataclass(frozen=True)
class ToolCalled:
    turn: int
    index: int  # position of the call within its turn
    tool: str
    args: dict[str, Any]


@dataclass(frozen=True)
class ToolResulted:
    turn: int
    index: int
    tool: str
    output: str  # exactly the text the model sees
    ok: bool
    seconds: float
    payload: Any = None  # structured form for people (rows, a CREATE statement, a join chain); see core.tools


@dataclass(frozen=True)
class BudgetUpdated:
    tool_turns_left: int
    consecutive_query_errors: int
    episode_tokens: int
    # the budget line appended to the tool results, e.g. "[4 tool turns left before you must answer]"
    message: str


@dataclass(frozen=True)
class TurnFinished:
    turn: int
    completion_tokens: int
    seconds: float
    tokens_per_second: float
    # Speculative decoding: tokens proposed by the drafter and how many the model kept.
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    # "stop", "length" (a budget ended it: ``cut_by`` says which), "cancelled"
    finish_reason: str = "stop"
    max_tokens: int = 0  # the tokens this turn was allowed
    cut_by: CutBy | None = None
    # a tool turn that held no parsable tool call (the model is told so, and the turn counts)
    no_tool_call: bool = False


@dataclass(frozen=True)
class FinalAnswer:
    sql: str
    ended_by: EndedBy


@dataclass
class QueryResultData:
    columns: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    row_count: int = 0
    truncated: bool = False
    error: str | None = None


@dataclass
class CallRecord:
    tool: str
    args: dict[str, Any]
    output: str
    ok: bool
    seconds: float = 0.0


@dataclass
class TurnRecord:
    """One assistant turn as it ended.  ``final``, ``max_tokens``, ``cut_by`` and ``no_tool_call``
    are what :class:`TurnFinished` said; ``None`` in a trace written before they were recorded."""

    completion: str
    calls: list[CallRecord] = field(default_factory=list)
    completion_tokens: int = 0
    seconds: float = 0.0
    finish_reason: str = "stop"
    final: bool | None = None
    max_tokens: int | None = None
    cut_by: CutBy | None = None
    no_tool_call: bool | None = None


@dataclass
class EpisodeStats:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    evaluated_tokens: int = 0
    seconds: float = 0.0
    engine: str = ""
    """Where the episode ran, as the engine says it ("local GPU (24 layers on CUDA0)", "local CPU")."""
    server_usage: ServerUsage | None = None
    """A server's engine: the tokens the server reported for the episode's requests (cached input
    included) and their cost at the configured prices; None for a local engine."""
    thread_tokens: int = 0
    """A continued follow-up: the tokens of the thread it continued (in ``prompt_tokens`` too)."""


@dataclass
class Episode:
    """A finished episode: everything needed to show it, store it, or replay it."""

    question: str
    db: str
    sql: str | None = None
    ended_by: EndedBy = "no_answer"
    result: QueryResultData | None = None
    turns: list[TurnRecord] = field(default_factory=list)
    prompt: str = ""
    prompt_source: str = ""  # "sqale_agent.py:<path>" or "builtin"
    stats: EpisodeStats = field(default_factory=EpisodeStats)
    error: str | None = None
    follow_up: FollowUpForm | None = None
    """A follow-up: "continued" (``prompt`` holds the whole thread) or "carried"; None: standalone."""
    earlier_questions: list[str] = field(default_factory=list)
    """A follow-up: the questions of the thread it followed, oldest first (this one not included)."""
    earlier_sqls: list[str | None] = field(default_factory=list)
    """The final SQL of each of ``earlier_questions``."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class EpisodeEnded:
    episode: Episode


Event = (
    EpisodeStarted
    | TurnStarted
    | TextDelta
    | ToolCalled
    | ToolResulted
    | BudgetUpdated
    | TurnFinished
    | FinalAnswer
    | EpisodeEnded
)
