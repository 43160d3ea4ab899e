"""Follow-up questions through the episode loop: continued threads, carried ones, and bad threads."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sqale_desktop.core.agent.events import Episode, EpisodeEnded, EpisodeStarted, Event, TurnStarted
from sqale_desktop.core.agent.followup import (
    CARRIED_HEADER,
    Thread,
    ThreadError,
    carried_question,
    continued_prefix,
    continued_turn,
    prefetch_follow_up,
    question_budget,
)
from sqale_desktop.core.agent.loop import run_episode
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.db import ReadOnlyDatabase, open_readonly
from sqale_desktop.core.engines.replay import ReplayEngine, count_tokens
from sqale_desktop.core.tools import ToolBox

OPENER = "<|im_start|>assistant\n<think>\n"
TOP = "SELECT Name FROM Artist ORDER BY ArtistId LIMIT 3"
COUNT = "SELECT COUNT(*) FROM Album"


def call(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


def script(sql: str) -> list[str]:
    return [
        "Tables.\n</think>\n\n" + call("list_tables"),
        "Submit.\n</think>\n\n" + call("submit_sql", sql=sql),
    ]


@pytest.fixture
def db(chinook: Path) -> Iterator[ReadOnlyDatabase]:
    database = open_readonly(chinook)
    yield database
    database.close()


def ask(
    db: ReadOnlyDatabase,
    engine: ReplayEngine,
    question: str,
    parent: Thread | None = None,
    cancel: threading.Event | None = None,
) -> tuple[list[Event], Episode]:
    events = list(
        run_episode(question, db, ToolBox(db), engine, cancel=cancel, db_label="chinook", parent=parent)
    )
    last = events[-1]
    assert isinstance(last, EpisodeEnded)
    return events, last.episode


def test_a_follow_up_appends_one_user_turn_to_the_exact_thread(db: ReadOnlyDatabase) -> None:
    first = ask(db, ReplayEngine(script(TOP), n_ctx=65536), "Name three artists.")[1]
    thread = Thread.of(first)
    events, second = ask(db, ReplayEngine(script(COUNT), n_ctx=65536), "And how many albums?", thread)
    started = events[0]
    assert isinstance(started, EpisodeStarted) and started.follow_up == "continued"
    assert second.follow_up == "continued" and second.sql == COUNT
    assert second.prompt.startswith(first.prompt)
    appended = second.prompt[len(first.prompt) :]
    assert appended.startswith(continued_turn(AgentProtocol(), "And how many albums?", OPENER))
    assert second.prompt.count("<|im_start|>system") == 1
    # only the new tokens are evaluated: the thread is held (the replay's perfect cache)
    assert second.stats.thread_tokens == first.stats.prompt_tokens
    assert second.stats.evaluated_tokens == second.stats.prompt_tokens - second.stats.thread_tokens
    assert (second.earlier_questions, second.earlier_sqls) == (["Name three artists."], [TOP])


def test_following_up_twice_keeps_every_question_of_the_thread(db: ReadOnlyDatabase) -> None:
    engine = ReplayEngine(script(TOP), n_ctx=65536)
    first = ask(db, engine, "Name three artists.")[1]
    second = ask(db, engine, "Only the first one?", Thread.of(first))[1]
    third = ask(db, engine, "And its albums?", Thread.of(second))[1]
    assert third.follow_up == "continued"
    assert third.prompt.startswith(second.prompt) and second.prompt.startswith(first.prompt)
    assert Thread.of(third).questions == ("Name three artists.", "Only the first one?", "And its albums?")
    assert Thread.of(third).sqls == (TOP, TOP, TOP)


def test_a_follow_up_gets_fresh_turn_budgets_after_a_long_thread(db: ReadOnlyDatabase) -> None:
    protocol = AgentProtocol()
    # a thread nearly as long as a whole episode budget: the follow-up still starts with all its turns
    long_prompt = "<|im_start|>system\n" + "word " * (protocol.episode_tokens - 100) + "<|im_end|>"
    thread = Thread(long_prompt, ("Earlier?",), (TOP,))
    events, episode = ask(db, ReplayEngine(script(COUNT), n_ctx=131072), "Now?", thread)
    turns = [event for event in events if isinstance(event, TurnStarted)]
    assert episode.follow_up == "continued"
    assert not turns[0].final and turns[0].tool_turns_left == protocol.tool_turns
    assert episode.sql == COUNT


def test_a_thread_that_outgrows_the_context_is_carried_as_text(db: ReadOnlyDatabase) -> None:
    protocol = AgentProtocol()
    first = ask(db, ReplayEngine(script(TOP)), "Name three artists.")[1]
    engine = ReplayEngine(script(COUNT), n_ctx=first.stats.prompt_tokens + question_budget(protocol) - 1)
    events, second = ask(db, engine, "And how many albums?", Thread.of(first))
    started = events[0]
    assert isinstance(started, EpisodeStarted) and started.follow_up == "carried"
    assert "exceed the context" in started.follow_up_note
    assert second.follow_up == "carried" and second.question == "And how many albums?"
    carried = carried_question(Thread.of(first), "And how many albums?")
    assert second.prompt.startswith(protocol.prompt_head(carried) + OPENER)
    assert not second.prompt.startswith(first.prompt)
    # the form, exactly as documented
    assert carried == (
        f"{CARRIED_HEADER}\n\n1. Name three artists.\nSQL: {TOP}\n\nFollow-up question: And how many albums?"
    )
    # a carried episode is itself a thread: the next follow-up knows every question
    assert Thread.of(second).questions == ("Name three artists.", "And how many albums?")


def test_a_thread_that_just_fits_is_continued(db: ReadOnlyDatabase) -> None:
    protocol = AgentProtocol()
    first = ask(db, ReplayEngine(script(TOP)), "Name three artists.")[1]
    new_turn = count_tokens(continued_turn(protocol, "Q?", OPENER))
    context = first.stats.prompt_tokens + new_turn + question_budget(protocol)
    assert (
        ask(db, ReplayEngine(script(COUNT), n_ctx=context), "Q?", Thread.of(first))[1].follow_up
        == "continued"
    )
    assert (
        ask(db, ReplayEngine(script(COUNT), n_ctx=context - 1), "Q?", Thread.of(first))[1].follow_up
        == "carried"
    )


def test_a_stopped_answer_is_no_thread_and_its_parent_stays_usable(db: ReadOnlyDatabase) -> None:
    engine = ReplayEngine(script(TOP), n_ctx=65536)
    first = ask(db, engine, "Name three artists.")[1]
    cancel = threading.Event()
    cancel.set()
    stopped = ask(db, engine, "And?", Thread.of(first), cancel=cancel)[1]
    assert stopped.ended_by == "cancelled"
    with pytest.raises(ThreadError, match="stopped"):
        Thread.of(stopped)
    again = ask(db, engine, "And?", Thread.of(first))[1]
    assert again.follow_up == "continued" and again.prompt.startswith(first.prompt)


@pytest.mark.parametrize(
    ("prompt", "questions", "sqls", "message"),
    [
        ("not a prompt", ("Q?",), ("SELECT 1",), "not a finished episode"),
        ("<|im_start|>system\nS<|im_end|>\n<|im_start|>assistant\n", ("Q?",), ("SELECT 1",), "end a turn"),
        ("<|im_start|>system\nS<|im_end|>", (), (), "no question"),
        ("<|im_start|>system\nS<|im_end|>", ("Q?", "R?"), ("SELECT 1",), "2 questions but 1"),
    ],
)
def test_a_damaged_thread_is_refused_with_a_reason(
    prompt: str, questions: tuple[str, ...], sqls: tuple[str | None, ...], message: str
) -> None:
    with pytest.raises(ThreadError, match=message):
        Thread(prompt, questions, sqls)


def test_an_unanswered_question_is_carried_as_no_answer() -> None:
    thread = Thread("<|im_start|>system\nS<|im_end|>", ("Q?",), (None,))
    assert "SQL: (no answer)" in carried_question(thread, "R?")


@pytest.mark.parametrize("question", ["Only the top three?", " leading space", "{braces} and 'quotes'"])
def test_the_continued_prefix_is_the_start_of_every_continued_turn_up_to_the_question(question: str) -> None:
    protocol = AgentProtocol()
    head = continued_prefix(protocol, OPENER)
    turn = continued_turn(protocol, question, OPENER)
    assert head.startswith("\n<|im_start|>user\n") and len(head) > len("\n<|im_start|>user\n")
    assert turn.startswith(head + question)


def test_an_engine_that_keeps_no_state_prefetches_nothing() -> None:
    thread = Thread("<|im_start|>system\nS<|im_end|>", ("Q?",), ("SELECT 1",))
    engine = ReplayEngine(["x"])
    assert prefetch_follow_up(engine, AgentProtocol(), OPENER, thread, threading.Event()) == 0
