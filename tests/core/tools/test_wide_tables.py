"""Tables wider than sqlparse's grouping limit (10,000 tokens): described all the same."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.tools import ToolBox
from sqale_desktop.core.tools.format import compact_sql


def test_describe_table_of_1500_columns(tmp_path: Path) -> None:
    path = tmp_path / "wide.sqlite"
    columns = ",\n  ".join(f"c{i} INTEGER  DEFAULT {i} /* column {i} */" for i in range(1500))
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE wide (\n  {columns}\n)")
    conn.close()
    with open_readonly(path) as db:
        output = ToolBox(db).call("describe_table", {"table_name": "wide"})
    assert output.ok, output.text
    assert output.text.startswith("CREATE TABLE wide (c0 INTEGER DEFAULT 0, c1 INTEGER DEFAULT 1,")
    assert output.text.endswith("c1499 INTEGER DEFAULT 1499)")
    assert "/*" not in output.text


def test_compact_sql_keeps_literals_and_quoted_names() -> None:
    sql = "CREATE TABLE t ( -- note\n a INT, /* x */ b TEXT  DEFAULT 'a  b',\"q  r\" REAL )"
    assert compact_sql(sql) == "CREATE TABLE t (a INT, b TEXT DEFAULT 'a  b',\"q  r\" REAL)"
