"""Format never changes what a query returns: the same column names and the same rows, over every
Spider dev gold query and every KaggleDBQA query on their own databases, and over the statements
sqlparse's upper-casing broke (``AS first``, ``AS year``) or its reindenting re-spaced."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqale_desktop.core.sql_layout import format_sql
from tests.helpers import shared_data


def outcome(conn: sqlite3.Connection, sql: str) -> tuple[Any, ...]:
    """Column names and rows (in order where the query orders them), or the error's class."""
    try:
        cursor = conn.execute(sql)
    except sqlite3.Error as exc:
        return ("error", type(exc).__name__)
    names = tuple(d[0] for d in cursor.description or ())
    got = cursor.fetchall()
    ordered = "order by" in sql.lower()
    return names, got if ordered else Counter(map(repr, got))


def read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def check_all(pairs: list[tuple[Path, str]]) -> int:
    """Run each query as written and formatted on its database; the number that returned rows."""
    conns: dict[Path, sqlite3.Connection] = {}
    answered = 0
    try:
        for path, sql in pairs:
            conn = conns.get(path) or conns.setdefault(path, read_only(path))
            formatted = format_sql(sql)
            before, after = outcome(conn, sql), outcome(conn, formatted)
            assert after == before, (sql, formatted)
            assert format_sql(formatted) == formatted, sql  # formatting twice changes nothing
            answered += before[0] != "error"
    finally:
        for conn in conns.values():
            conn.close()
    return answered


def test_spider_dev_gold_queries_return_the_same_after_format() -> None:
    root = shared_data("text2sql/spider")
    questions = json.loads((root / "dev.json").read_text(encoding="utf-8"))
    pairs = [(root / "database" / q["db_id"] / f"{q['db_id']}.sqlite", q["query"]) for q in questions]
    pairs = [(path, sql) for path, sql in pairs if path.exists()]  # the shared copy lacks wta_1
    assert len(pairs) >= 970
    assert check_all(pairs) >= 950


def test_kaggledbqa_queries_return_the_same_after_format() -> None:
    root = shared_data("text2sql/kaggledbqa")
    questions = json.loads((root / "questions.json").read_text(encoding="utf-8"))
    pairs = [(root / q["db_path"], q["gold_sql"]) for q in questions]
    assert check_all(pairs) >= 80


SAMPLE = [
    "SELECT FirstName AS first, LastName AS last, strftime('%Y', BirthDate) AS year, 1 AS level "
    'FROM "Employee"',
    "select count( * ), max(Total)  ,  min(Total)+1 from Invoice",
    "select case when Total > 10 then 'big' else 'small' end, count(distinct CustomerId) "
    "from Invoice group by 1",
    'select BillingCountry country, sum(Total) as "Order" from Invoice where Total between 1 and 5 and '
    "BillingCountry like 'U%' or BillingCountry is null group by BillingCountry "
    "order by 2 desc limit 3 offset 1",
    "select * from (select Name as name, Milliseconds / 1000 as seconds from Track) "
    "where seconds > 500 order by name",
    "-- the top customers\nselect c.FirstName, -- first\n  c.LastName from Customer c join Invoice i on "
    "i.CustomerId = c.CustomerId where i.Total > 20 /* big */ order by 1",
    "with t(x) as (select 1 union all select x + 1 from t where x < 3) select x as first from t order by x",
    "select 'select from where' as \"from\", `Name` from Artist where ArtistId in (1, 2) order by 2",
    "SELECT InvoiceId, Total FROM Invoice WHERE Total NOT BETWEEN 1 AND 20 AND InvoiceId < 20 "
    "ORDER BY Total DESC",
    "select Name from Genre intersect select Name from Genre order by Name; select 1 as last",
]


@pytest.mark.parametrize("sql", SAMPLE)
def test_chinook_statements_return_the_same_after_format(sql: str) -> None:
    path = shared_data("sample/chinook.sqlite")
    with read_only(path) as conn:
        formatted = format_sql(sql)
        for statement_before, statement_after in zip(sql.split("; "), formatted.split(";\n\n"), strict=True):
            assert outcome(conn, statement_after) == outcome(conn, statement_before), formatted


def test_aliases_names_and_literals_keep_their_spelling() -> None:
    formatted = format_sql(
        "select a as first, b last, c as year, d as level from t where e = 'and' order by level"
    )
    assert formatted == (
        "SELECT a AS first,\n       b last,\n       c AS year,\n       d AS level\nFROM t\nWHERE e = 'and'\n"
        "ORDER BY level"
    )


def test_an_unaliased_result_column_is_copied_as_written() -> None:
    """Its text is its header: ``count( * )`` and a lower-case ``case`` stay as typed."""
    formatted = format_sql("select count( * ), case when x then 1 end from t where x is not null and y=1")
    assert formatted == (
        "SELECT count( * ),\n       case when x then 1 end\nFROM t\nWHERE x IS NOT NULL\n  AND y=1"
    )


def test_clauses_and_subqueries_are_laid_out() -> None:
    formatted = format_sql(
        "select a from t left join u on t.id = u.id where a in (select b from v where c between 1 and 2) "
        "group by a having count(*) > 1 order by a desc limit 5"
    )
    assert formatted == (
        "SELECT a\nFROM t\nLEFT JOIN u ON t.id = u.id\nWHERE a IN (SELECT b\n"
        "            FROM v\n            WHERE c BETWEEN 1 AND 2)\n"
        "GROUP BY a\nHAVING count(*) > 1\nORDER BY a DESC\nLIMIT 5"
    )


def test_a_statement_that_is_not_a_query_keeps_its_layout_and_comments() -> None:
    ddl = 'create table "t" ( -- from t.csv\n  "a" INTEGER, -- original name: \'\'\n  "b" TEXT\n)'
    assert format_sql(ddl) == ddl.replace("create table", "CREATE TABLE")


@given(st.text(max_size=300))
@settings(max_examples=200, deadline=None)
def test_any_text_formats_to_the_same_tokens(text: str) -> None:
    """Whatever the text, formatting changes only white space and the case of keywords."""
    import sqlparse

    def words(sql: str) -> list[str]:
        tokens = sqlparse.lexer.tokenize(sql)  # type: ignore[no-untyped-call]
        return [" ".join(v.upper().split()) for _, v in tokens if not v.isspace()]

    assert words(format_sql(text)) == words(text.strip())
