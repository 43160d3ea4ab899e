"""A person with a CSV and a folder of CSVs, not a database: they open them as they would a database.

The `sqale-desktop` command (a child process, as a terminal runs it) answers a question about a CSV
with the replay engine and prints the grid; a folder of CSVs becomes one database where
``join_path`` finds the way through a key the import inferred; the second open reuses the import,
and the files the person owns are as they were.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.commands.subprocess_cli import run_cli
from tests.helpers import fingerprint

SCRIPT = [
    'Tables first.\n</think>\n\n{"tool": "list_tables"}',
    "Sum the sales per region.\n</think>\n\n"
    '{"tool": "submit_sql", "args": {"sql": '
    '"SELECT region, SUM(amount) AS total FROM sales GROUP BY region ORDER BY region"}}',
]


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "SQALE_DESKTOP_HOME": str(home)}


def test_ask_about_a_csv_then_join_a_folder_of_csvs(tmp_path: Path) -> None:
    sales = tmp_path / "sales.csv"
    sales.write_text(
        "region;amount;day\nNorth;10,5;2024-01-02\nSouth;3;2024-01-03\nNorth;1,5;2024-01-04\n",
        encoding="cp1252",
    )
    before = fingerprint(sales)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    home = tmp_path / "home"
    asked = run_cli(
        "ask",
        "--db",
        str(sales),
        "--question",
        "Sales per region?",
        "--replay",
        str(script),
        "--json",
        env=_env(home),
    )
    assert asked.returncode == 0, asked.stderr
    episode = json.loads(asked.stdout)
    assert episode["ended_by"] == "submit_sql"
    assert episode["result"]["columns"] == ["region", "total"]
    assert episode["result"]["rows"] == [["North", 12.0], ["South", 3.0]]  # decimal commas are numbers
    assert "note: sales.csv — imported as table sales (3 rows)" in asked.stderr
    grid = run_cli("query", "--db", str(sales), "SELECT day, amount FROM sales ORDER BY day", env=_env(home))
    assert grid.returncode == 0, grid.stderr
    assert [c.strip() for c in grid.stdout.splitlines()[0].split("|")] == ["day", "amount"]
    assert "2024-01-02" in grid.stdout
    assert "(imported before, unchanged)" in grid.stderr  # the second open reuses the import
    assert fingerprint(sales) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "sales.csv", "script.json"]

    shop = tmp_path / "shop"
    shop.mkdir()
    (shop / "customers.csv").write_text("id,name\n1,Ada\n2,Grace\n", encoding="utf-8")
    (shop / "orders.csv").write_text("id,customer_id,total\n7,1,9.5\n8,2,3\n9,1,4\n", encoding="utf-8")
    joined = run_cli(
        "tool",
        "--db",
        str(shop),
        "join_path",
        '{"table_a": "orders", "table_b": "customers"}',
        env=_env(home),
    )
    assert joined.returncode == 0, joined.stderr
    assert "orders.customer_id" in joined.stdout and "customers.id" in joined.stdout
    assert "foreign key orders.customer_id → customers.id" in joined.stderr
    assert sorted(p.name for p in shop.iterdir()) == ["customers.csv", "orders.csv"]
