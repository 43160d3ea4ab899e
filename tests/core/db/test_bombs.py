"""Statements that spend their time or memory inside one C call: each ends cleanly, quickly.

Without the bounds these ran for minutes (printf's repeat loop ignores the progress handler),
filled gigabytes (rows of zeroblob) or spent minutes in the keyword pre-check (huge text).
printf and instr are SQLite's own: a call that runs on past the limit is ended by killing the
database worker (``core/db/worker.py``), so no function needs replacing any more.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sqale_desktop.core.db import QueryFailed, QueryInterrupted, QueryTimeout, open_readonly
from sqale_desktop.core.db.errors import ResultTooLarge, StatementTooLong
from sqale_desktop.core.db.guard import leading_words, refuse_by_keyword
from sqale_desktop.core.db.opening import MAX_SQL_CHARS
from sqale_desktop.core.tools.toolbox import ToolBox
from tests.core.db.running import run_in_thread, wait_until_busy

# Characters of padding one printf call asks for in the streams below: each call is quick, and
# only many of them in a row meet the time limit.
PRINTF_WIDTH = 100_000
PRINTF_BOMB = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 5) "
    "SELECT count(printf('%.*c', 2147483647-x, 'x')) FROM c"
)
ZEROBLOB_ROWS = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 1000) "
    "SELECT zeroblob(60000000) FROM c"
)
PLAIN_PRINTF = [
    "SELECT printf('%05d|%-6s|%.3c|%8.2f|%x|%q|%Q|%%', 42, 'ab', '*', 3.14159, 255, 'it''s', NULL)",
    "SELECT format('%s has %d rows', 'Artist', 275)",
    "SELECT printf('%*d|%-*s|', 6, 7, 4, 'z')",
    "SELECT printf(NULL), printf('%s'), printf('%d', 'x'), printf('%.2f', '3.5abc')",
    "SELECT printf('%,d and %!.20g', 1234567, 0.1)",
]


@pytest.fixture
def bombs(tmp_path: Path) -> Path:
    """A database whose views hold the bombs, as a hostile file would."""
    path = tmp_path / "bombs.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.execute("INSERT INTO t VALUES (1), (2)")
    conn.execute(f"CREATE VIEW printf_bomb AS {PRINTF_BOMB}")
    conn.execute(f"CREATE VIEW zeroblob_rows AS {ZEROBLOB_ROWS}")
    conn.execute("CREATE VIEW padded AS SELECT printf('%04d-%s', x, 'a') AS p FROM t")
    conn.commit()
    conn.close()
    return path


def test_printf_width_bomb_stops_at_the_time_limit(bombs: Path) -> None:
    with open_readonly(bombs, time_limit_s=1) as db:
        with pytest.raises(QueryTimeout, match="1 s time limit"):
            db.execute(PRINTF_BOMB)
        assert db.execute("SELECT 1").rows == [(1,)]


def test_printf_bomb_inside_a_view_stops_at_the_limit_through_sample_rows(bombs: Path) -> None:
    with open_readonly(bombs, time_limit_s=1) as db:
        output = ToolBox(db).call("sample_rows", {"table_name": "printf_bomb"})
        assert not output.ok
        assert "time limit" in output.text


@pytest.mark.parametrize("sql", PLAIN_PRINTF)
def test_ordinary_printf_gives_exactly_what_sqlite_gives(bombs: Path, sql: str) -> None:
    plain = sqlite3.connect(":memory:")
    expected = plain.execute(sql).fetchall()
    plain.close()
    with open_readonly(bombs) as db:
        assert db.execute(sql).rows == expected


def test_printf_in_a_view_still_works(bombs: Path) -> None:
    with open_readonly(bombs) as db:
        assert db.execute("SELECT p FROM padded").rows == [("0001-a",), ("0002-a",)]


def test_printf_of_a_blob_with_invalid_utf8_gives_sqlites_text(bombs: Path) -> None:
    # The old replacement failed here with a message about a column the user never wrote.
    with open_readonly(bombs) as db:
        assert db.execute("SELECT printf('%s|', x'ff41')").rows == [("\ufffdA|",)]


def test_a_stream_of_allowed_printf_calls_still_meets_the_time_limit(bombs: Path) -> None:
    sql = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
        f"SELECT count(printf('%.*c', {PRINTF_WIDTH}, 'x')) FROM c"
    )
    with open_readonly(bombs, time_limit_s=0.3) as db, pytest.raises(QueryTimeout):
        db.execute(sql)


def test_stop_ends_a_printf_heavy_statement(bombs: Path) -> None:
    sql = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
        f"SELECT count(printf('%.*c', {PRINTF_WIDTH}, 'x')) FROM c"
    )
    with open_readonly(bombs, time_limit_s=60) as db:
        thread, errors = run_in_thread(db, sql)
        wait_until_busy(db, thread)
        db.interrupt()
        thread.join(timeout=30)
    assert [type(e) for e in errors] == [QueryInterrupted]


def test_rows_of_huge_values_stop_at_the_result_budget(bombs: Path) -> None:
    with open_readonly(bombs, time_limit_s=30) as db:
        with pytest.raises(ResultTooLarge, match="more than 256 MB"):
            db.execute(ZEROBLOB_ROWS)
        with pytest.raises(ResultTooLarge):
            db.execute("SELECT * FROM zeroblob_rows")
        with db.cursor(ZEROBLOB_ROWS) as cursor, pytest.raises(ResultTooLarge):
            for _ in range(10):
                cursor.fetch_page(2)
        assert db.execute("SELECT length(zeroblob(1000))").rows == [(1000,)]


def test_a_single_value_over_the_length_limit_is_refused(bombs: Path) -> None:
    with open_readonly(bombs) as db, pytest.raises(QueryFailed, match="too big"):
        db.execute("SELECT zeroblob(200000000)")


def test_giant_statements_are_refused_before_parsing(bombs: Path) -> None:
    with open_readonly(bombs) as db:
        with pytest.raises(StatementTooLong, match="1,000,000 allowed"):
            db.execute(" " * (MAX_SQL_CHARS + 1) + "SELECT 1")
        with pytest.raises(StatementTooLong):
            db.execute("SELECT '" + "x" * MAX_SQL_CHARS + "'")
        assert db.execute("SELECT '" + "x" * 900_000 + "'").row_count == 1


def test_the_keyword_check_reads_only_the_start_of_long_text() -> None:
    padding = " \n" * 450_000 + "/*" + "c" * 10_000 + "*/ -- note\n"
    assert leading_words(padding + "insert into t values (1)", 2) == ["INSERT", "INTO"]
    assert refuse_by_keyword(padding + "DROP TABLE IF EXISTS t") == "read-only: DROP TABLE is not allowed"
    assert leading_words("/* never closed " + "x" * 100_000) == []


# Ten VM instructions a row, 100 ms each: the progress handler (every 2,000 instructions) would
# not run once in the whole statement, which would finish after seconds, limit or no limit.
FEW_EXPENSIVE_STEPS = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 100) "
    "SELECT count(zeroblob(60000000)) FROM c"
)


def test_the_time_limit_holds_between_progress_checks(bombs: Path) -> None:
    with open_readonly(bombs, time_limit_s=0.3) as db:
        with pytest.raises(QueryTimeout, match=r"0\.3 s time limit"):
            db.execute(FEW_EXPENSIVE_STEPS)
        assert db.execute("SELECT 1").rows == [(1,)]  # a fresh connection: no interrupt inherited


def test_stop_holds_between_progress_checks(bombs: Path) -> None:
    with open_readonly(bombs, time_limit_s=60) as db:
        thread, errors = run_in_thread(db, FEW_EXPENSIVE_STEPS)
        wait_until_busy(db, thread)
        db.interrupt()
        thread.join(timeout=60)
        assert [type(e) for e in errors] == [QueryInterrupted]
        assert db.execute("SELECT 2").rows == [(2,)]


INSTR_CASES = [
    "SELECT instr('héllo wörld', 'wö'), instr('abc', ''), instr('', ''), instr('', 'a'), instr(NULL, 'a')",
    "SELECT instr(12345, 3), instr(1.5e20, '+'), instr(x'00112233', x'2233'), instr('ab3', x'33')",
    "SELECT instr(x'c3a962', 'b'), instr('日本語テキスト', 'テ'), instr(x'ff61', 'a'), instr('aaa', 'aa')",
]


@pytest.mark.parametrize("sql", INSTR_CASES)
def test_instr_gives_exactly_what_sqlite_gives(bombs: Path, sql: str) -> None:
    plain = sqlite3.connect(":memory:")
    expected = plain.execute(sql).fetchall()
    plain.close()
    with open_readonly(bombs) as db:
        assert db.execute(sql).rows == expected


def test_a_quadratic_instr_stops_at_the_time_limit(bombs: Path) -> None:
    sql = "SELECT instr(zeroblob(40000000) || x'01', zeroblob(20000000) || x'02')"
    with open_readonly(bombs, time_limit_s=1) as db:
        with pytest.raises(QueryTimeout):
            db.execute(sql)
        assert db.execute("SELECT instr('abc', 'c')").rows == [(3,)]


def test_a_printf_bomb_in_a_generated_column_stops_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "generated.sqlite"
    conn = sqlite3.connect(path)
    # SQLite computes a generated column on INSERT, so the row goes in under a harmless width and
    # the bomb is written into the schema afterwards (plain sqlite3 would run it for 45 s here).
    conn.execute("CREATE TABLE g (x INTEGER, y TEXT AS (printf('%.*c', 0 * x, 'x')))")
    conn.execute("INSERT INTO g (x) VALUES (1)")
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_schema SET sql = replace(sql, '0 * x', '2147483647 - x') WHERE name = 'g'")
    conn.commit()
    conn.close()
    with open_readonly(path, time_limit_s=1) as db, pytest.raises(QueryTimeout, match="time limit"):
        db.execute("SELECT length(y) FROM g")


def test_like_patterns_are_bounded(bombs: Path) -> None:
    long_pattern = "SELECT 'a' LIKE '%' || replace(hex(zeroblob(5000)), '0', 'a') || 'b'"
    with open_readonly(bombs, time_limit_s=1) as db:
        with pytest.raises(QueryFailed, match="pattern too complex"):
            db.execute(long_pattern)
        assert db.execute("SELECT 'Hello' LIKE 'h%o', 'abc' GLOB 'a?c'").rows == [(1, 1)]
