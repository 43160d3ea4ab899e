"""The episode loop over a real database and the real tool box, driven by scripted completions."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    TurnFinished,
    TurnStarted,
)
from sqale_desktop.core.agent.loop import EpisodeControl, run_episode
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.db import ReadOnlyDatabase, open_readonly
from sqale_desktop.core.engines.base import EngineError, EngineSession, SamplingParams
from sqale_desktop.core.engines.replay import ReplayEngine, count_tokens
from sqale_desktop.core.tools import RowsPayload, SubmittedPayload, ToolBox

LIST = '{"tool": "list_tables"}'


def call(tool: str, **args: object) -> str:
    import json

    return json.dumps({"tool": tool, "args": args})


def turn(*calls: str, think: str = "Plan.") -> str:
    return f"{think}\n</think>\n\n" + "\n".join(calls)


@pytest.fixture
def db(chinook: Path) -> Iterator[ReadOnlyDatabase]:
    database = open_readonly(chinook)
    yield database
    database.close()


def run(
    db: ReadOnlyDatabase,
    script: list[str],
    protocol: AgentProtocol | None = None,
    cancel: threading.Event | None = None,
) -> tuple[list[Event], Episode]:
    events = list(
        run_episode("How many artists?", db, ToolBox(db), ReplayEngine(script), protocol, cancel=cancel)
    )
    last = events[-1]
    assert isinstance(last, EpisodeEnded)
    return events, last.episode


def test_submit_sql_ends_the_episode_and_the_answer_is_rerun(db: ReadOnlyDatabase) -> None:
    script = [
        turn(LIST, call("run_query", sql="SELECT COUNT(*) FROM Artist")),
        turn(
            call("submit_sql", sql="SELECT COUNT(*) AS n FROM Artist"),
            call("run_query", sql="SELECT 'never'"),
        ),
    ]
    events, episode = run(db, script)
    assert episode.ended_by == "submit_sql"
    assert episode.sql == "SELECT COUNT(*) AS n FROM Artist"
    assert episode.result is not None
    assert (episode.result.columns, episode.result.rows, episode.result.row_count) == (["n"], [[275]], 1)
    assert [len(t.calls) for t in episode.turns] == [2, 1]  # nothing after submit_sql runs
    assert [type(e).__name__ for e in events if not isinstance(e, TextDelta)] == [
        "EpisodeStarted", "TurnStarted", "TurnFinished", "ToolCalled", "ToolResulted", "ToolCalled",
        "ToolResulted", "BudgetUpdated", "TurnStarted", "TurnFinished", "ToolCalled", "ToolResulted",
        "FinalAnswer", "EpisodeEnded",
    ]  # fmt: skip
    assert episode.prompt_source == "builtin"
    assert episode.db.endswith("chinook.sqlite")
    submitted = [e for e in events if isinstance(e, ToolResulted) and e.tool == "submit_sql"]
    assert submitted[0].payload == SubmittedPayload(
        "SELECT COUNT(*) AS n FROM Artist", RowsPayload(["n"], [(275,)], 1, False)
    )


def test_text_deltas_are_labelled_think_then_answer(db: ReadOnlyDatabase) -> None:
    events, episode = run(db, [turn(call("submit_sql", sql="SELECT 1"), think="Let me think.")])
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas if d.phase == "think") == "Let me think.\n</think>"
    assert "".join(d.text for d in deltas if d.phase == "answer").strip() == call(
        "submit_sql", sql="SELECT 1"
    )
    assert "".join(d.text for d in deltas) == episode.turns[0].completion


def test_prompt_is_appended_turn_by_turn(db: ReadOnlyDatabase) -> None:
    script = [turn(LIST), turn(call("submit_sql", sql="SELECT 1"))]
    _, episode = run(db, script)
    protocol = AgentProtocol()
    opener = "<|im_start|>assistant\n<think>\n"
    expected_start = (
        protocol.prompt_head("How many artists?") + opener + script[0] + "<|im_end|>\n<|im_start|>user\n"
    )
    assert episode.prompt.startswith(expected_start)
    assert episode.prompt.endswith(opener + script[1] + "<|im_end|>")
    assert "Tool result: Album, Artist, Customer" in episode.prompt
    assert "\n\n[5 tool turns left before you must answer]<|im_end|>" in episode.prompt


def test_six_tool_turns_then_a_final_turn(db: ReadOnlyDatabase) -> None:
    script = [turn(call("run_query", sql=f"SELECT {i}")) for i in range(6)] + [
        "Done.</think>\nSELECT 42 AS answer"
    ]
    events, episode = run(db, script)
    starts = [e for e in events if isinstance(e, TurnStarted)]
    assert [(s.turn, s.final, s.tool_turns_left) for s in starts][-2:] == [(6, False, 1), (7, True, 0)]
    budgets = [e.message for e in events if isinstance(e, BudgetUpdated)]
    assert budgets[:5] == [f"[{n} tool turns left before you must answer]" for n in (5, 4, 3, 2)] + [
        "[1 tool turn left before you must answer]"
    ]
    assert budgets[5] == AgentProtocol().exploration_limit_message("SELECT 5")
    assert (episode.ended_by, episode.sql) == ("final_turn", "SELECT 42 AS answer")
    assert episode.result is not None and episode.result.rows == [[42]]


def test_a_broken_final_answer_falls_back_to_the_last_working_query(db: ReadOnlyDatabase) -> None:
    script = [
        turn(
            call("run_query", sql="SELECT COUNT(*) FROM Album"),
            call("run_query", sql="SELECT nope FROM Album"),
        ),
        *[turn(LIST)] * 5,
        "</think>```sql\nSELECT broken FROM\n```",
    ]
    events, episode = run(db, script)
    assert episode.ended_by == "fallback_to_last_working_query"
    assert episode.sql == "SELECT COUNT(*) FROM Album"
    assert episode.result is not None and episode.result.rows == [[347]]
    assert [e for e in events if isinstance(e, FinalAnswer)] == [
        FinalAnswer(sql="SELECT COUNT(*) FROM Album", ended_by="fallback_to_last_working_query")
    ]


def test_no_working_query_and_no_answer(db: ReadOnlyDatabase) -> None:
    _, episode = run(db, [turn(LIST)] * 6 + ["I am not sure.</think>"])
    assert (episode.ended_by, episode.sql, episode.result) == ("no_answer", None, None)


def test_a_submitted_query_that_fails_falls_back(db: ReadOnlyDatabase) -> None:
    script = [turn(call("run_query", sql="SELECT 7")), turn(call("submit_sql", sql="SELECT * FROM Nope"))]
    events, episode = run(db, script)
    results = [e for e in events if isinstance(e, ToolResulted)]
    assert results[-1].tool == "submit_sql" and not results[-1].ok
    assert (episode.ended_by, episode.sql) == ("fallback_to_last_working_query", "SELECT 7")


def test_four_failed_queries_in_a_row_end_the_exploration(db: ReadOnlyDatabase) -> None:
    bad = call("run_query", sql="SELECT * FROM Nope")
    script = [
        turn(call("run_query", sql="SELECT 1"), bad),
        turn(bad, LIST, bad),  # other tools do not reset the count
        turn(bad),
        "</think>\n" + call("submit_sql", sql="SELECT 2"),
    ]
    events, episode = run(db, script)
    budgets = [e for e in events if isinstance(e, BudgetUpdated)]
    assert [b.consecutive_query_errors for b in budgets] == [1, 3, 4]
    assert budgets[-1].message == AgentProtocol().exploration_limit_message("SELECT 1")
    starts = [(s.final, s.tool_turns_left) for s in events if isinstance(s, TurnStarted)]
    assert starts == [(False, 6), (False, 5), (False, 4), (True, 0)]
    assert (episode.ended_by, episode.sql) == ("final_turn", "SELECT 2")


def test_a_working_query_resets_the_error_count(db: ReadOnlyDatabase) -> None:
    bad = call("run_query", sql="SELECT * FROM Nope")
    script = [
        turn(bad, bad, bad),
        turn(call("run_query", sql="SELECT 1"), bad),
        turn(call("submit_sql", sql="SELECT 1")),
    ]
    events, _ = run(db, script)
    assert [b.consecutive_query_errors for b in events if isinstance(b, BudgetUpdated)] == [3, 1]


def test_malformed_calls_become_error_text_and_the_episode_goes_on(db: ReadOnlyDatabase) -> None:
    script = [
        turn(
            '{"tool": "drop_table"}',
            '{"tool": "describe_table", "args": {}}',
            '{"tool": "run_query", "args": {',
        ),
        turn("I will just answer in prose."),
        turn(call("submit_sql", sql="SELECT 1")),
    ]
    events, episode = run(db, script)
    results = [e for e in events if isinstance(e, ToolResulted)]
    assert [r.ok for r in results] == [False, False, False, True]
    assert all(r.output.startswith("Error: ") for r in results[:3])
    assert "Tool result: Error: no tool call found." in episode.prompt
    assert episode.ended_by == "submit_sql"


def test_tool_turn_token_cap_and_episode_budget(db: ReadOnlyDatabase) -> None:
    head = AgentProtocol().prompt_head("How many artists?") + "<|im_start|>assistant\n<think>\n"
    protocol = replace(AgentProtocol(), tool_turn_tokens=10, episode_tokens=count_tokens(head) + 12)
    long_think = "word " * 50
    _, episode = run(db, [long_think + "</think>" + LIST, "</think>SELECT 3"], protocol)
    assert episode.turns[0].finish_reason == "length"
    assert episode.turns[0].completion_tokens == 10
    # the episode budget is spent after the first turn, so the second turn is the final one
    assert (episode.ended_by, episode.sql) == ("final_turn", "SELECT 3")
    assert len(episode.turns) == 2
    assert "You have reached the exploration limit." in episode.prompt


def test_stats_come_from_the_engine_session(db: ReadOnlyDatabase) -> None:
    _, episode = run(db, [turn(LIST), turn(call("submit_sql", sql="SELECT 1"))])
    assert episode.stats.completion_tokens == sum(t.completion_tokens for t in episode.turns) > 0
    assert episode.stats.prompt_tokens >= episode.stats.completion_tokens
    assert episode.stats.seconds >= 0


def test_cancel_while_streaming_ends_cancelled(db: ReadOnlyDatabase) -> None:
    cancel = threading.Event()
    engine = ReplayEngine([turn(LIST), "x " * 500], chunk_chars=2)
    events: list[Event] = []
    for event in run_episode("q", db, ToolBox(db), engine, cancel=cancel):
        events.append(event)
        if isinstance(event, TextDelta) and event.turn == 2 and len(events) > 1:
            cancel.set()
    episode = events[-1].episode if isinstance(events[-1], EpisodeEnded) else None
    assert episode is not None
    assert (episode.ended_by, episode.sql) == ("cancelled", None)
    assert len(episode.turns[1].completion) < 1000
    assert episode.prompt.endswith("<|im_end|>")
    assert FinalAnswer(sql="", ended_by="cancelled") in events


def test_episode_control_interrupts_a_running_query(db: ReadOnlyDatabase) -> None:
    db.time_limit_s = 120  # only the interrupt can end this query in time
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
    control = EpisodeControl()
    events: list[Event] = []
    engine = ReplayEngine([turn(call("run_query", sql=endless)), turn(call("submit_sql", sql="SELECT 1"))])
    for event in run_episode("q", db, ToolBox(db), engine, cancel=control.event):
        events.append(event)
        if isinstance(event, ToolCalled):
            threading.Timer(0.05, control.cancel).start()
    last = events[-1]
    assert isinstance(last, EpisodeEnded)
    assert last.episode.ended_by == "cancelled"
    assert control.cancelled
    assert not any(isinstance(e, ToolResulted) for e in events)


class _FailingEngine:
    name = "failing"

    def describe(self) -> str:
        return "fails"

    def chat_template(self) -> str | None:
        return None

    def new_session(self, prompt: str) -> EngineSession:
        session = ReplayEngine(["unused"]).new_session(prompt)

        def broken(max_tokens: int, sampling: SamplingParams, cancel: threading.Event) -> Iterator[str]:
            yield "partial"
            raise EngineError("the server went away")

        session.generate = broken  # type: ignore[method-assign]
        return session


def test_an_engine_failure_ends_the_episode_with_error(db: ReadOnlyDatabase) -> None:
    events = list(run_episode("q", db, ToolBox(db), _FailingEngine()))
    last = events[-1]
    assert isinstance(last, EpisodeEnded)
    assert (last.episode.ended_by, last.episode.error) == ("error", "the server went away")
    assert last.episode.prompt.endswith("<|im_end|>")  # the turn is closed however it ended
    assert [(t.completion, t.finish_reason) for t in last.episode.turns] == [("partial", "error")]
    assert isinstance(events[-2], FinalAnswer)


def test_a_plain_chatml_template_opens_turns_without_think(db: ReadOnlyDatabase) -> None:
    template = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    engine = ReplayEngine(
        ["<think>hm</think>" + LIST, "<think>ok</think>" + call("submit_sql", sql="SELECT 1")],
        template=template,
    )
    events = list(run_episode("q", db, ToolBox(db), engine))
    episode = events[-1].episode if isinstance(events[-1], EpisodeEnded) else None
    assert episode is not None and episode.ended_by == "submit_sql"
    assert "<|im_start|>assistant\n<think>hm</think>" in episode.prompt
    assert [d.phase for d in events if isinstance(d, TextDelta) and d.text.startswith("<think>")] == [
        "think",
        "think",
    ]


def test_turn_finished_reports_tokens(db: ReadOnlyDatabase) -> None:
    events, episode = run(db, [turn(call("submit_sql", sql="SELECT 1"))])
    finished = [e for e in events if isinstance(e, TurnFinished)]
    assert [f.completion_tokens for f in finished] == [t.completion_tokens for t in episode.turns]
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert sum(d.tokens for d in deltas) == sum(count_tokens(d.text) for d in deltas) > 0


def test_the_first_event_states_the_protocol_in_force(db: ReadOnlyDatabase) -> None:
    protocol = replace(AgentProtocol(), tool_turns=3, tool_turn_tokens=700)
    events, _ = run(db, [turn(call("submit_sql", sql="SELECT 1"))], protocol)
    first = events[0]
    assert isinstance(first, EpisodeStarted)
    assert first.protocol is protocol and first.engine == "replay (1 scripted turns)"


def test_turn_finished_states_how_each_turn_ended(db: ReadOnlyDatabase) -> None:
    """Finish reason, the budget that cut a turn (its own or the episode's), no tool call."""
    head = AgentProtocol().prompt_head("How many artists?") + "<|im_start|>assistant\n<think>\n"
    rambling = "word " * 60
    # A sqale_agent.py with other budgets: 40 tokens a tool turn, and an episode budget that runs
    # out inside the third turn (Chinook's table list and the budget lines take the rest).
    protocol = replace(AgentProtocol(), tool_turn_tokens=40, episode_tokens=count_tokens(head) + 200)
    script = [rambling, turn(LIST), rambling, "</think>SELECT 5"]
    events, episode = run(db, script, protocol)
    finished = [e for e in events if isinstance(e, TurnFinished)]
    facts = [(f.finish_reason, f.cut_by, f.no_tool_call) for f in finished]
    assert facts[:2] == [("length", "turn", True), ("stop", None, False)]
    assert finished[0].max_tokens == 40 and finished[0].completion_tokens == 40
    # the third turn had less than 40 tokens of the episode left: the episode's budget cut it
    third = finished[2]
    assert (third.finish_reason, third.cut_by, third.no_tool_call) == ("length", "episode", True)
    assert 0 < third.max_tokens < 40 and third.completion_tokens == third.max_tokens
    final = finished[-1]
    assert (final.finish_reason, final.cut_by, final.no_tool_call) == ("stop", None, False)
    assert final.max_tokens == protocol.final_turn_tokens
    # the record keeps what the events said (a restored episode shows the same notes)
    assert [(t.final, t.max_tokens, t.cut_by, t.no_tool_call) for t in episode.turns] == [
        (f.turn == len(finished), f.max_tokens, f.cut_by, f.no_tool_call) for f in finished
    ]


_PIECES = st.sampled_from(
    [
        "</think>",
        "<think>",
        "\n",
        " ",
        LIST,
        call("describe_table", table_name="Album"),
        call("describe_table", table_name="No Such"),
        call("sample_rows", table_name="Genre", limit=2),
        call("distinct_values", table_name="Genre", column_name="Name", limit=3),
        call("join_path", table_a="Track", table_b="Artist"),
        call("foreign_keys"),
        call("run_query", sql="SELECT COUNT(*) FROM Track"),
        call("run_query", sql="SELECT * FROM Nope"),
        call("run_query", sql="DELETE FROM Album"),
        call("submit_sql", sql="SELECT 1"),
        call("submit_sql", sql="SELEC 1"),
        '{"tool": "run_query", "args": {"sql": ',
        "```sql\nSELECT Name FROM Genre\n```",
        "SELECT 2",
        '{"tool": "oops"}',
    ]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_PIECES | st.text(max_size=6), max_size=6).map("".join), min_size=0, max_size=8))
def test_any_script_ends_cleanly(db: ReadOnlyDatabase, script: list[str]) -> None:
    events, episode = run(db, script)
    assert episode.ended_by in ("submit_sql", "final_turn", "fallback_to_last_working_query", "no_answer")
    assert episode.error is None
    assert 1 <= len(episode.turns) <= 7
    assert episode.prompt.endswith("<|im_end|>")
    assert (episode.sql is None) == (episode.ended_by == "no_answer")
    if episode.ended_by in ("submit_sql", "final_turn"):
        assert episode.result is not None and episode.result.error is None  # the answer ran
    if episode.ended_by == "fallback_to_last_working_query":
        assert episode.result is not None
    finals = [e for e in events if isinstance(e, FinalAnswer)]
    assert len(finals) == 1 and finals[0].ended_by == episode.ended_by


def test_pending_tool_results_count_against_the_episode_budget(db: ReadOnlyDatabase) -> None:
    head = AgentProtocol().prompt_head("How many artists?") + "<|im_start|>assistant\n<think>\n"
    first = turn(LIST)
    # room for the first completion, but not for the table list it asks for
    budget = count_tokens(head) + count_tokens(first) + 1 + 5
    events, episode = run(db, [first, "</think>SELECT 4"], replace(AgentProtocol(), episode_tokens=budget))
    budgets = [e for e in events if isinstance(e, BudgetUpdated)]
    assert budgets[0].message.startswith("You have reached the exploration limit.")
    assert budgets[0].episode_tokens >= budget
    assert [s.final for s in events if isinstance(s, TurnStarted)] == [False, True]
    assert (episode.ended_by, episode.sql) == ("final_turn", "SELECT 4")


def test_setting_only_the_flag_still_stops_a_running_query(db: ReadOnlyDatabase) -> None:
    db.time_limit_s = 120  # only an interrupt can end this query in time
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
    cancel = threading.Event()
    engine = ReplayEngine([turn(call("run_query", sql=endless))])
    events: list[Event] = []
    for event in run_episode("q", db, ToolBox(db), engine, cancel=cancel):
        events.append(event)
        if isinstance(event, ToolCalled):
            threading.Timer(0.05, cancel.set).start()  # no db.interrupt(): the loop must do it
    last = events[-1]
    assert isinstance(last, EpisodeEnded) and last.episode.ended_by == "cancelled"


def test_a_stop_seen_with_the_tool_call_runs_no_query(db: ReadOnlyDatabase) -> None:
    cancel = threading.Event()
    ran: list[str] = []

    class RecordingToolBox(ToolBox):
        def call(self, name: str, args: Any = None) -> Any:
            ran.append(name)
            return super().call(name, args)

    engine = ReplayEngine([turn(LIST)])
    for event in run_episode("q", db, RecordingToolBox(db), engine, cancel=cancel):
        if isinstance(event, ToolCalled):
            cancel.set()
        last = event
    assert isinstance(last, EpisodeEnded) and last.episode.ended_by == "cancelled"
    assert ran == []
