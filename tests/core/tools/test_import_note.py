"""An imported database's ``_columns`` note is not data: ``list_tables`` and the visible schema leave it
out, yet it still answers by name and its original names are on the columns.  A database that was
not imported, even one with a table of that name, is described exactly as before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.db.introspect import cached_schema
from sqale_desktop.core.imports import import_source
from sqale_desktop.core.tools import ToolBox


def imported(tmp_path: Path) -> Path:
    path = tmp_path / "odd.csv"
    path.write_text("id,,Name,name\n1,a,b,c\n", encoding="utf-8")
    return import_source(path).db_path


def test_list_tables_offers_only_the_data(tmp_path: Path) -> None:
    with open_readonly(imported(tmp_path)) as db:
        box = ToolBox(db)
        listed = box.call("list_tables", {})
        assert listed.text == "odd"
        assert [t.name for t in cached_schema(db).visible()] == ["odd"]
        missing = box.call("describe_table", {"table_name": "missing"})
        assert "_columns" not in missing.text  # not suggested either


def test_the_note_still_answers_by_name(tmp_path: Path) -> None:
    with open_readonly(imported(tmp_path)) as db:
        box = ToolBox(db)
        described = box.call("describe_table", {"table_name": "_columns"})
        assert described.ok and "original_name" in described.text
        queried = box.call(
            "run_query", {"sql": "SELECT column_name, original_name FROM _columns WHERE position = 2"}
        )
        assert queried.ok and "column_2" in queried.text


def test_renamed_columns_carry_their_original_names(tmp_path: Path) -> None:
    with open_readonly(imported(tmp_path)) as db:
        table = cached_schema(db).find("odd")
        assert table is not None
        assert [(c.name, c.original) for c in table.columns] == [
            ("id", None),
            ("column_2", ""),
            ("Name", None),
            ("name_2", "name"),
        ]


def test_a_users_own_columns_table_is_still_data(tmp_path: Path) -> None:
    path = tmp_path / "own.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE _columns (table_name TEXT, column_name TEXT)")
        conn.execute("CREATE TABLE other (x INTEGER)")
    conn.close()
    with open_readonly(path) as db:
        box = ToolBox(db)
        assert box.call("list_tables", {}).text == "_columns, other"
        assert all(c.original is None for t in cached_schema(db).tables for c in t.columns)


def test_the_command_lines_tools_list_only_the_data(tmp_path: Path) -> None:
    """The way a person meets it without the window: ``sqale-desktop tool --db FILE.csv``."""
    from tests.commands.subprocess_cli import run_cli

    path = tmp_path / "odd.csv"
    path.write_text("id,,Name,name\n1,a,b,c\n", encoding="utf-8")
    listed = run_cli("tool", "--db", str(path), "list_tables")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == "odd"
    note = run_cli("tool", "--db", str(path), "run_query", '{"sql": "SELECT count(*) AS n FROM _columns"}')
    assert note.returncode == 0, note.stderr
    assert note.stdout == "n\n4\n"
