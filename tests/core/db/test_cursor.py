"""QueryCursor: pages, the hard cap detected with cap+1, and clean ends."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from sqale_desktop.core.db import QueryCursor, QueryDenied, QueryInterrupted, open_readonly
from tests.helpers import join_within

TRACKS = 3503


def test_pages_through_every_row(chinook: Path) -> None:
    with open_readonly(chinook) as db:
        cursor = db.cursor("SELECT TrackId, Name FROM Track ORDER BY TrackId")
        assert cursor.columns == ["TrackId", "Name"]
        seen: list[int] = []
        while not cursor.exhausted:
            page = cursor.fetch_page(500)
            assert len(page) <= 500
            seen.extend(row[0] for row in page)
        assert len(seen) == TRACKS == len(set(seen))
        assert not cursor.truncated
        assert cursor.fetch_page(500) == []


@pytest.mark.parametrize(("cap", "truncated"), [(1000, True), (TRACKS, False), (TRACKS - 1, True), (1, True)])
def test_hard_cap_is_detected_with_one_extra_row(chinook: Path, cap: int, truncated: bool) -> None:
    with open_readonly(chinook) as db, db.cursor("SELECT * FROM Track", max_rows=cap) as cursor:
        rows = []
        while not cursor.exhausted:
            rows.extend(cursor.fetch_page(500))
        assert len(rows) == min(cap, TRACKS)
        assert cursor.truncated is truncated


def test_execute_truncation_matches(chinook: Path) -> None:
    with open_readonly(chinook) as db:
        assert db.execute("SELECT * FROM Track", max_rows=TRACKS).truncated is False
        result = db.execute("SELECT * FROM Track", max_rows=10)
        assert result.truncated and result.row_count == 10 == len(result.rows)


def test_statement_without_columns_is_exhausted_at_once(chinook: Path) -> None:
    with open_readonly(chinook) as db:
        cursor = db.cursor("-- only a comment")
        assert cursor.exhausted and cursor.fetch_page(10) == []


def test_cursor_refuses_writes(chinook: Path) -> None:
    with open_readonly(chinook) as db, pytest.raises(QueryDenied):
        db.cursor("DELETE FROM Track")


def test_interrupted_page_ends_the_cursor_and_the_database_stays_usable(chinook: Path) -> None:
    with open_readonly(chinook, time_limit_s=60) as db:
        cursor = db.cursor("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c")
        assert len(cursor.fetch_page(10)) == 10
        db.interrupt()  # nothing is running now: the cursor is not affected
        assert len(cursor.fetch_page(10)) == 10
        errors: list[BaseException] = []

        def fetch_forever() -> None:
            try:
                cursor.fetch_page(10**9)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=fetch_forever)
        thread.start()
        while not db.busy:
            assert thread.is_alive()
            time.sleep(0.005)
        db.interrupt()
        thread.join(timeout=30)
        assert [type(e) for e in errors] == [QueryInterrupted]
        assert cursor.exhausted and cursor.fetch_page(10) == []
        assert db.execute("SELECT 3").rows == [(3,)]


ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def test_a_stop_flag_set_before_the_statement_starts_still_stops_it(chinook: Path) -> None:
    """Where interrupt() comes too early (the job was still getting its connection), the flag does not."""
    with open_readonly(chinook, time_limit_s=60) as db:
        stop = threading.Event()
        db.interrupt()
        stop.set()
        with pytest.raises(QueryInterrupted, match="cancelled"):
            db.cursor(ENDLESS, cancel=stop)
        cursor = db.cursor("SELECT 1")
        with pytest.raises(QueryInterrupted, match="cancelled"):
            cursor.fetch_page(1, cancel=stop)
        assert db.execute("SELECT 3").rows == [(3,)]  # the flag belonged to those calls only


def test_a_stop_flag_set_while_the_statement_runs_stops_it(chinook: Path) -> None:
    with open_readonly(chinook, time_limit_s=60) as db:
        stop = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            try:
                db.cursor(ENDLESS, cancel=stop)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        while not db.busy:
            assert thread.is_alive()
            time.sleep(0.005)
        stop.set()
        thread.join(timeout=30)
        assert [type(e) for e in errors] == [QueryInterrupted]
        assert db.execute("SELECT 3").rows == [(3,)]


def test_cursor_outlives_the_thread_that_started_it(chinook: Path) -> None:
    """The grid pages on the GUI thread through a cursor a short-lived pool thread started."""
    with open_readonly(chinook) as db:
        made: list[QueryCursor] = []
        starter = threading.Thread(target=lambda: made.append(db.cursor("SELECT TrackId FROM Track")))
        starter.start()
        join_within(starter)
        (cursor,) = made
        # Another new thread opening its own connection prunes dead threads' idle connections.
        other = threading.Thread(target=lambda: db.execute("SELECT 1"))
        other.start()
        join_within(other)
        total = 0
        while not cursor.exhausted:
            total += len(cursor.fetch_page(500))
        assert total == TRACKS
        cursor.close()
        in_use_before = len(db.workers_in_use())
        last = threading.Thread(target=lambda: db.execute("SELECT 1"))
        last.start()
        join_within(last)
        assert len(db.workers_in_use()) < in_use_before + 1  # the finished cursor's dead link was pruned
