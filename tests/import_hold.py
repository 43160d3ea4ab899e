"""Holding an import while it runs, for the window's tests and the journeys (fixtures do not cross
the two test folders, so each has a ``held_import`` fixture over this one helper)."""

from __future__ import annotations

import threading
from typing import Any

import pytest


def hold_after_first_rows(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """The import holds after its first report that brought rows (the tab is up and shows them)
    until the returned event is set, so "while it still runs" is a state, not a race.

    The hold is where the import's reports reach the app (``isolated.build``'s progress): the
    readers run in a child process, which a patch in this process cannot reach, and the app's
    side is what the window waits on.  While it holds, the parent does not take the child's next
    message, so a Stop meanwhile is seen before the child's answer.  Every count is reported: a
    throttled report could otherwise leave the tab showing an earlier count (the fast path's
    writer counts 0 rows before its first batch)."""
    from sqale_desktop.core.imports import isolated, progress
    from sqale_desktop.core.imports.progress import ImportProgress

    held, release = threading.Event(), threading.Event()
    build = isolated.build

    def held_build(*args: Any) -> Any:
        *before, report, cancel = args

        def report_then_hold(p: ImportProgress) -> None:
            if held.is_set():
                assert release.wait(60), "the test never released the import"
            if report is not None:
                report(p)
            if p.rows > 0:
                held.set()

        return build(*before, report_then_hold, cancel)

    monkeypatch.setattr(progress, "REPORT_INTERVAL_S", 0.0)
    monkeypatch.setattr(isolated, "build", held_build)
    return release
