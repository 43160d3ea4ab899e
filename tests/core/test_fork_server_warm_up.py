"""When a fork server takes its warm-up (``core.child.forks``): one started for a run (the first
run of a process, or ``start_ahead(request_follows=True)`` at the start of an import) forks that
run's child before any step, since a step begun meanwhile delayed it by as long; one started
ahead of a person's choice warms up at once; one whose run never came (its caller was stopped)
warms up all the same.  The module's steps write their names to a file and its work answers with
what the file held (``tests/warm_order_child.py``), started by a command line of its own: the
app's hidden ``--child-module`` runs only the app's modules."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sqale_desktop.core import child
from sqale_desktop.core.child import forks
from tests.helpers import until_warm
from tests.warm_order_child import LOG_ENV, MODULE, STEPS

pytestmark = pytest.mark.skipif(not forks.available(), reason="fork servers are Linux's")


@pytest.fixture
def warm_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    entry = f"import sys; from {MODULE} import child_main; sys.exit(child_main(sys.argv[1:]))"
    monkeypatch.setattr(forks, "child_command", lambda module, *args: [sys.executable, "-c", entry])
    log = tmp_path / "warm.log"
    log.write_text("", encoding="utf-8")
    monkeypatch.setenv(LOG_ENV, str(log))  # the server and its children inherit it
    child.discard_spares()
    yield log
    child.discard_spares()


def _run() -> list[str]:
    done = child.run(MODULE, {}, what="the test's work", spare=True)
    return list(done.data["taken"])


def test_the_first_run_is_forked_before_the_server_takes_a_step(warm_log: Path) -> None:
    assert _run() == []
    until_warm(MODULE)  # then, idle, it warms up for the next run
    assert warm_log.read_text(encoding="utf-8").split() == list(STEPS)
    assert _run() == list(STEPS)


def test_a_server_started_ahead_of_a_choice_warms_up_at_once(warm_log: Path) -> None:
    child.start_ahead(MODULE)
    until_warm(MODULE)
    assert _run() == list(STEPS)


def test_a_server_started_for_a_run_that_never_came_warms_up_all_the_same(warm_log: Path) -> None:
    child.start_ahead(MODULE, request_follows=True)  # and no run: the caller was stopped
    until_warm(MODULE)  # after forks.FIRST_REQUEST_S
    assert warm_log.read_text(encoding="utf-8").split() == list(STEPS)
