"""Holding an import while it runs, for the window's tests and the journeys (fixtures do not cross
the two test folders, so each has a ``held_import`` fixture over this one helper)."""

from __future__ import annotations

import threading

import pytest


def hold_after_first_rows(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """The import holds after its first batch (the first count that brought rows: the tab is up
    and shows them) until the returned event is set, so "while it still runs" is a state, not a
    race.  The meter reports every count here: its throttled report could otherwise leave the
    tab showing an earlier count (the fast path's writer counts 0 rows before its first batch)."""
    from sqale_desktop.core.imports import progress
    from sqale_desktop.core.imports.progress import Meter

    held, release = threading.Event(), threading.Event()
    count = Meter.count

    def count_then_hold(self: Meter, rows: int, bytes_read: int | None = None) -> None:
        if held.is_set():
            assert release.wait(60), "the test never released the import"
        count(self, rows, bytes_read)
        if self.rows > 0:
            held.set()

    monkeypatch.setattr(progress, "REPORT_INTERVAL_S", 0.0)
    monkeypatch.setattr(Meter, "count", count_then_hold)
    return release
