"""The history writer: writes run off the UI thread in the order asked, what follows each runs on
the UI thread after it, and flush (the quit's) leaves nothing pending (issue 32)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sqale_desktop.ui.history_writer import HistoryWriter


def test_writes_run_in_order_off_the_ui_thread_and_what_follows_runs_on_it(qtbot: Any) -> None:
    writer = HistoryWriter()
    ui = threading.get_ident()
    log: list[tuple[str, int, bool]] = []

    def write(index: int) -> Callable[[], None]:
        return lambda: log.append(("write", index, threading.get_ident() == ui))

    def then(index: int) -> Callable[[], None]:
        return lambda: log.append(("then", index, threading.get_ident() == ui))

    for index in range(5):
        writer.submit(write(index), then(index))
    qtbot.waitUntil(lambda: writer.pending() == 0, timeout=10_000)
    writes = [entry for entry in log if entry[0] == "write"]
    thens = [entry for entry in log if entry[0] == "then"]
    assert writes == [("write", index, False) for index in range(5)]
    assert thens == [("then", index, True) for index in range(5)]
    for index in range(5):  # each follows its own write
        assert log.index(("write", index, False)) < log.index(("then", index, True))


def test_flush_waits_for_a_held_write_and_runs_what_follows(qtbot: Any) -> None:
    writer = HistoryWriter()
    gate = threading.Event()
    followed: list[str] = []

    def held() -> None:
        gate.wait(60)  # a deadline only: the test opens it below

    writer.submit(held, lambda: followed.append("first"))
    writer.submit(lambda: None, lambda: followed.append("second"))
    assert writer.pending() == 2 and writer.is_busy()
    gate.set()
    assert writer.flush()
    assert followed == ["first", "second"] and writer.pending() == 0 and not writer.is_busy()


def test_a_failing_write_is_logged_and_what_follows_still_runs(qtbot: Any, caplog: Any) -> None:
    writer = HistoryWriter()
    followed: list[str] = []

    def fail() -> None:
        raise OSError("disk full")

    writer.submit(fail, lambda: followed.append("after the failure"))
    assert writer.flush()
    assert followed == ["after the failure"]
    assert "could not write to the history: disk full" in caplog.text
