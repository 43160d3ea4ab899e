"""The pool and the agent thread: failures are reported, cancel reaches running work, threads end."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core.agent.events import TextDelta, ToolCalled
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.ui.agent_runner import AgentRunner, EpisodeDone, EpisodeFailed, EventItem, merge_deltas
from sqale_desktop.ui.workers import TaskPool
from tests.ui.runtimes import scripted


def test_a_failing_job_reports_its_exception(qtbot: Any) -> None:
    pool = TaskPool()

    def boom(_ctx: Any) -> None:
        raise ValueError("broken on purpose")

    failures: list[BaseException] = []
    pool.start(boom, failed=failures.append)
    qtbot.waitUntil(lambda: bool(failures))
    assert isinstance(failures[0], ValueError) and str(failures[0]) == "broken on purpose"
    assert pool.shutdown()


def test_shutdown_cancels_a_running_job(qtbot: Any) -> None:
    pool = TaskPool()
    started = threading.Event()

    def wait_for_cancel(ctx: Any) -> str:
        started.set()
        ctx.cancel.wait(30)
        return "cancelled" if ctx.cancelled else "timed out"

    results: list[str] = []
    pool.start(wait_for_cancel, finished=results.append)
    assert started.wait(5)
    assert pool.is_busy()
    assert pool.shutdown(5_000)
    assert not pool.is_busy()
    qtbot.waitUntil(lambda: results == ["cancelled"])


def test_shutdown_forgets_the_jobs_it_drops(qtbot: Any) -> None:
    """A queued job that never runs is finished and forgotten, so nothing waits on it for ever."""
    pool = TaskPool(max_threads=1)
    started = threading.Event()

    def wait_for_cancel(ctx: Any) -> None:
        started.set()
        ctx.cancel.wait(30)

    ran: list[str] = []
    pool.start(wait_for_cancel)
    assert started.wait(5)
    queued = pool.start(lambda _ctx: ran.append("ran"))
    assert pool.active_jobs() == 2
    assert pool.shutdown(5_000)
    assert queued.finished and pool.active_jobs() == 0 and not pool.is_busy()
    assert ran == []


def test_a_thread_freed_during_shutdown_starts_no_queued_job(qtbot: Any) -> None:
    """The race CI met: the cancelled job's thread picks up a queued job before shutdown takes it
    back.  Here Qt's tryTake is made to lose that race every time (as if the thread had the job
    already); the closing flag, set before anything is cancelled, still keeps the job from running."""
    pool = TaskPool(max_threads=1)
    started = threading.Event()

    def wait_for_cancel(ctx: Any) -> None:
        started.set()
        ctx.cancel.wait(30)

    ran: list[str] = []
    done: list[bool] = []
    pool.start(wait_for_cancel)
    assert started.wait(5)
    queued = pool.start(lambda _ctx: ran.append("ran"), finished=lambda _r: done.append(True))
    pool._pool.tryTake = lambda _runnable: False  # a thread "already has it": it must not run it
    assert pool.shutdown(5_000)
    assert ran == [] and done == []
    assert queued.finished and queued.cancelled and pool.active_jobs() == 0 and not pool.is_busy()


def test_nothing_starts_after_shutdown(qtbot: Any) -> None:
    """A reply delivered while the window closes (a file that opened) may call start(): the job does
    not run, so it cannot emit into objects that are being deleted (issue 20, item 14)."""
    pool = TaskPool()
    assert pool.shutdown()
    ran: list[str] = []
    failures: list[BaseException] = []
    context = pool.start(lambda _ctx: ran.append("ran"), failed=failures.append)
    assert context.finished and context.cancelled
    assert pool.active_jobs() == 0 and not pool.is_busy() and pool.wait(1_000)
    assert ran == [] and failures == []


def test_merge_deltas_keeps_order_and_boundaries() -> None:
    items: list[Any] = [
        EventItem(1, TextDelta(1, "a", "think")),
        EventItem(1, TextDelta(1, "b", "think")),
        EventItem(1, TextDelta(1, "c", "answer")),
        EventItem(1, ToolCalled(1, 0, "list_tables", {})),
        EventItem(1, TextDelta(2, "d", "think")),
        EventItem(1, TextDelta(2, "e", "think")),
        EpisodeDone(1),
    ]
    merged = merge_deltas(items)
    assert merged == [
        EventItem(1, TextDelta(1, "ab", "think")),
        EventItem(1, TextDelta(1, "c", "answer")),
        EventItem(1, ToolCalled(1, 0, "list_tables", {})),
        EventItem(1, TextDelta(2, "de", "think")),
        EpisodeDone(1),
    ]
    # Another episode's delta is never merged into this one's.
    apart = [EventItem(1, TextDelta(1, "a", "think")), EventItem(2, TextDelta(1, "b", "think"))]
    assert merge_deltas(list(apart)) == apart


@pytest.mark.parametrize("failure", ["engine", "database"])
def test_agent_failures_are_reported_not_swallowed(
    qtbot: Any, chinook: Path, tmp_path: Path, failure: str
) -> None:
    from sqale_desktop.core.engines.base import EngineError

    def broken_engine() -> Any:
        raise EngineError("the model file is unreadable")

    factory = broken_engine if failure == "engine" else (lambda: ReplayEngine([]))
    target = chinook if failure == "engine" else tmp_path / "missing.sqlite"
    runner = AgentRunner(scripted(factory))
    states: list[tuple[str, str]] = []
    runner.engine_state.connect(lambda state, text: states.append((state, text)))
    runner.ask("How many tracks?", target)
    items: list[Any] = []
    qtbot.waitUntil(lambda: items.extend(runner.drain()) or any(isinstance(i, EpisodeDone) for i in items))
    failed = [i for i in items if isinstance(i, EpisodeFailed)]
    assert len(failed) == 1
    if failure == "engine":
        assert "unreadable" in str(failed[0].error)
        qtbot.waitUntil(lambda: ("failed", "the model file is unreadable") in states)
    else:
        assert "no such file" in str(failed[0].error)
    assert runner.shutdown()
    assert not runner.is_busy()


@pytest.mark.parametrize("known", [True, False], ids=["known-condition", "bug"])
def test_only_a_bug_leaves_a_traceback_in_the_log(
    qtbot: Any, caplog: pytest.LogCaptureFixture, known: bool
) -> None:
    """One check (core.errors.is_known) decides, not the exception's module (issue 11)."""
    from sqale_desktop.core.db.errors import DatabaseUnreadable

    pool = TaskPool()

    def fails(_ctx: Any) -> None:
        raise DatabaseUnreadable("shop.sqlite is locked") if known else KeyError("a bug")

    failures: list[BaseException] = []
    with caplog.at_level("DEBUG", logger="sqale_desktop.ui.workers"):
        pool.start(fails, failed=failures.append)
        qtbot.waitUntil(lambda: bool(failures))
    assert pool.shutdown()
    tracebacks = [r for r in caplog.records if r.exc_info]
    if known:
        assert tracebacks == []
    else:
        assert len(tracebacks) == 1 and "fails" in tracebacks[0].getMessage()


def test_stop_reaches_a_running_query_through_the_cancel_flag_alone(qtbot: Any, chinook: Path) -> None:
    """The window's Stop only sets the episode's flag; the loop's watcher interrupts the query."""
    import json

    from sqale_desktop.core.agent.events import EpisodeEnded
    from sqale_desktop.core.settings import Settings

    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
    script = ["</think>" + json.dumps({"tool": "run_query", "args": {"sql": endless}})]
    # 120 s: only the interrupt can end this query within the wait below.
    runner = AgentRunner(scripted(lambda: ReplayEngine(script), Settings(query_time_limit_s=120.0)))
    try:
        runner.ask("q", chinook)
        items: list[Any] = []
        qtbot.waitUntil(
            lambda: (
                items.extend(runner.drain())
                or any(isinstance(i, EventItem) and isinstance(i.event, ToolCalled) for i in items)
            ),
            timeout=20_000,
        )
        runner.stop()
        qtbot.waitUntil(
            lambda: items.extend(runner.drain()) or any(isinstance(i, EpisodeDone) for i in items),
            timeout=20_000,
        )
    finally:
        assert runner.shutdown()
    ended = [i.event for i in items if isinstance(i, EventItem) and isinstance(i.event, EpisodeEnded)]
    assert [e.episode.ended_by for e in ended] == ["cancelled"]


def test_the_tools_run_under_the_time_limit_of_the_runtime_in_force(qtbot: Any, chinook: Path) -> None:
    """The query time limit reaches the agent's tools through ``Runtime.open_database`` only: after
    ``set_runtime`` the tool database is opened again under the new limit, and the model stays."""
    import json

    from sqale_desktop.core.agent.events import EpisodeEnded
    from sqale_desktop.core.settings import Settings

    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
    script = [
        "</think>" + json.dumps({"tool": "run_query", "args": {"sql": endless}}),
        "</think>" + json.dumps({"tool": "submit_sql", "args": {"sql": "SELECT 1"}}),
    ]
    built: list[ReplayEngine] = []

    def factory() -> ReplayEngine:
        built.append(ReplayEngine(script))
        return built[-1]

    runner = AgentRunner(scripted(factory, Settings(query_time_limit_s=0.5)))
    outputs: list[str] = []
    try:
        for limit in (0.5, 1.5):
            if limit != runner.runtime.settings.query_time_limit_s:
                retuned = runner.runtime.retune(Settings(query_time_limit_s=limit))
                runner.set_runtime(retuned, keep_engine=True)
            items: list[Any] = []
            runner.ask("How many?", chinook)
            qtbot.waitUntil(
                lambda items=items: (
                    items.extend(runner.drain()) or any(isinstance(i, EpisodeDone) for i in items)
                ),
                timeout=30_000,
            )
            [ended] = [
                i.event for i in items if isinstance(i, EventItem) and isinstance(i.event, EpisodeEnded)
            ]
            outputs.append(ended.episode.turns[0].calls[0].output)
    finally:
        assert runner.shutdown()
    assert "ran past the 0.5 s time limit" in outputs[0]
    assert "ran past the 1.5 s time limit" in outputs[1]
    assert len(built) == 1  # the same model answered both
