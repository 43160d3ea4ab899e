"""The window's SQL formatter on text sqlparse refuses to group: shown unformatted, no error."""

from __future__ import annotations

from sqale_desktop.ui.sql_highlight import format_sql


def test_a_4000_column_statement_is_returned_unformatted() -> None:
    sql = "CREATE TABLE wide (" + ", ".join(f"c{i} INTEGER" for i in range(4000)) + ")"
    assert format_sql(sql + "\n") == sql


def test_ordinary_statements_are_still_formatted() -> None:
    assert format_sql("select a from t where b = 1") == "SELECT a\nFROM t\nWHERE b = 1"
