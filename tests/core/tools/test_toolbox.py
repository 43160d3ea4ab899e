"""The eight tools on real databases: the exact text the model reads, and error texts."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.tools import (
    TOOL_NAMES,
    TOOL_SPECS,
    DDLPayload,
    ForeignKeysPayload,
    JoinPathPayload,
    RowsPayload,
    SubmittedPayload,
    TablesPayload,
    ToolBox,
)


@pytest.fixture
def box(chinook: Path) -> Iterator[ToolBox]:
    with open_readonly(chinook) as db:
        yield ToolBox(db)


def test_tool_names_follow_the_model_card() -> None:
    assert TOOL_NAMES == (
        "list_tables",
        "describe_table",
        "foreign_keys",
        "join_path",
        "sample_rows",
        "distinct_values",
        "run_query",
        "submit_sql",
    )
    specs = {spec.name: [(a.name, a.type, a.required) for a in spec.args] for spec in TOOL_SPECS}
    assert specs["distinct_values"] == [
        ("table_name", "string", True),
        ("column_name", "string", True),
        ("limit", "integer", False),
    ]
    assert specs["foreign_keys"] == [("table_name", "string", False)]
    assert all(spec.description for spec in TOOL_SPECS)


def test_list_tables(box: ToolBox) -> None:
    out = box.call("list_tables", {})
    assert out.ok
    assert out.text == (
        "Album, Artist, Customer, Employee, Genre, Invoice, InvoiceLine, MediaType, Playlist, "
        "PlaylistTrack, Track"
    )
    assert isinstance(out.payload, TablesPayload) and len(out.payload.names) == 11


def test_describe_table_is_one_line_and_case_insensitive(box: ToolBox) -> None:
    out = box.call("describe_table", {"table_name": "artist"})
    assert out.ok
    assert out.text == (
        "CREATE TABLE [Artist] ([ArtistId] INTEGER NOT NULL, [Name] NVARCHAR(120), "
        "CONSTRAINT [PK_Artist] PRIMARY KEY ([ArtistId]))"
    )
    assert isinstance(out.payload, DDLPayload)
    assert out.payload.table == "Artist" and "\n" in out.payload.sql


def test_unknown_table_suggests_close_names(box: ToolBox) -> None:
    out = box.call("describe_table", {"table_name": "Artists"})
    assert not out.ok
    assert out.text == "Error: no such table: Artists. Did you mean: Artist?"
    out = box.call("sample_rows", {"table_name": "invoice_line"})
    assert not out.ok and "InvoiceLine" in out.text
    out = box.call("describe_table", {"table_name": "zzzz"})
    assert out.text == "Error: no such table: zzzz. Use list_tables to see the tables."


def test_quoted_table_names_from_the_model_are_understood(box: ToolBox) -> None:
    for name in ('"Artist"', "[Artist]", "`Artist`"):
        assert box.call("sample_rows", {"table_name": name, "limit": 1}).ok


def test_foreign_keys_of_one_table_and_of_all(box: ToolBox) -> None:
    out = box.call("foreign_keys", {"table_name": "Track"})
    assert out.text.splitlines() == [  # in the order the CREATE statement declares them
        "Track.AlbumId -> Album.AlbumId",
        "Track.GenreId -> Genre.GenreId",
        "Track.MediaTypeId -> MediaType.MediaTypeId",
    ]
    everything = box.call("foreign_keys", {})
    assert everything.ok and len(everything.text.splitlines()) == 11
    assert "Employee.ReportsTo -> Employee.EmployeeId" in everything.text
    assert isinstance(everything.payload, ForeignKeysPayload) and len(everything.payload.lines) == 11
    assert box.call("foreign_keys", {"table_name": "Genre"}).text == "Genre has no foreign keys"


def test_join_path_chinook(box: ToolBox) -> None:
    out = box.call("join_path", {"table_a": "Artist", "table_b": "Track"})
    assert out.ok
    assert out.text == (
        "Artist → Album → Track\nAlbum.ArtistId = Artist.ArtistId\nTrack.AlbumId = Album.AlbumId"
    )
    assert isinstance(out.payload, JoinPathPayload)
    assert out.payload.tables == ["Artist", "Album", "Track"]
    assert out.payload.joins[0].on == (("ArtistId", "ArtistId"),)
    back = box.call("join_path", {"table_a": "track", "table_b": "ARTIST"})
    assert back.text.splitlines()[0] == "Track → Album → Artist"


def test_join_path_self_reference(box: ToolBox) -> None:
    out = box.call("join_path", {"table_a": "Employee", "table_b": "employee"})
    assert out.ok
    assert out.text == (
        "Employee is both ends: no join needed\nself-references: Employee.ReportsTo -> Employee.EmployeeId"
    )


def test_sample_rows_and_limits(box: ToolBox) -> None:
    out = box.call("sample_rows", {"table_name": "Genre", "limit": 2})
    assert out.text == "GenreId | Name\n1 | Rock\n2 | Jazz\n... (showing first 2 rows; more rows exist)"
    default = box.call("sample_rows", {"table_name": "Genre"})
    assert len(default.text.splitlines()) == 1 + 5 + 1
    assert box.call("sample_rows", {"table_name": "Genre", "limit": "3"}).ok
    assert box.call("sample_rows", {"table_name": "Genre", "limit": 3.0}).ok
    for bad in (0, -1, 101, 10**12, "ten", 2.5, True, [3], {"n": 1}):
        out = box.call("sample_rows", {"table_name": "Genre", "limit": bad})
        assert not out.ok and out.text.startswith("Error: limit must be an integer from 1 to 100"), bad
    whole = box.call("sample_rows", {"table_name": "MediaType", "limit": 100})
    assert whole.ok and "more rows exist" not in whole.text
    assert isinstance(whole.payload, RowsPayload) and whole.payload.row_count == 5


def test_distinct_values(box: ToolBox) -> None:
    out = box.call("distinct_values", {"table_name": "Customer", "column_name": "country", "limit": 3})
    assert out.ok
    lines = out.text.splitlines()
    assert lines[0] == "Country" and len(lines) == 5 and lines[-1].startswith("... (showing first 3 rows")
    bad = box.call("distinct_values", {"table_name": "Customer", "column_name": "Contry"})
    assert not bad.ok
    assert bad.text == "Error: no such column: Contry in Customer. Did you mean: Country, Company, City?"
    missing = box.call("distinct_values", {"table_name": "Customer"})
    assert missing.text == "Error: distinct_values needs column_name"


def test_run_query_shows_five_rows_and_keeps_more_for_the_ui(box: ToolBox) -> None:
    out = box.call("run_query", {"sql": "SELECT GenreId, Name FROM Genre ORDER BY GenreId"})
    lines = out.text.splitlines()
    assert lines[0] == "GenreId | Name" and lines[1] == "1 | Rock"
    assert len(lines) == 7 and lines[-1] == "... (showing first 5 rows; more rows exist)"
    assert isinstance(out.payload, RowsPayload) and out.payload.row_count == 25
    assert not out.payload.truncated
    exact = box.call("run_query", {"sql": "SELECT 1.0 AS a, NULL AS b, 26 * 100.0 / 216 AS c"})
    assert exact.text == "a | b | c\n1.0 | None | 12.037037037037036"
    empty = box.call("run_query", {"sql": "SELECT * FROM Genre WHERE 0"})
    assert empty.text == "GenreId | Name\n(no rows)"


def test_run_query_errors_are_text(box: ToolBox) -> None:
    assert box.call("run_query", {"sql": "INSERT INTO Genre VALUES (99, 'x')"}).text == (
        "Error: read-only: INSERT is not allowed"
    )
    assert box.call("run_query", {"sql": "SELECT nope FROM Genre"}).text == "Error: no such column: nope"
    box.db.time_limit_s = 0.1
    slow = box.call(
        "run_query",
        {"sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"},
    )
    assert slow.text == "Error: the query ran past the 0.1 s time limit and was stopped"
    assert box.call("run_query", {"sql": ""}).text == "Error: sql must not be empty"


def test_submit_sql_records_only_sql_that_runs(box: ToolBox) -> None:
    bad = box.call("submit_sql", {"sql": "SELECT nope FROM Genre"})
    assert not bad.ok and box.submitted is None
    denied = box.call("submit_sql", {"sql": "DELETE FROM Genre"})
    assert not denied.ok and box.submitted is None
    out = box.call("submit_sql", {"sql": "SELECT count(*) FROM Genre"})
    assert out.ok and out.text == "SQL submitted."
    assert box.submitted == "SELECT count(*) FROM Genre"
    assert isinstance(out.payload, SubmittedPayload) and out.payload.result is not None
    assert out.payload.result.rows == [(25,)]


@pytest.mark.parametrize(
    ("name", "args", "text"),
    [
        (
            "drop_everything",
            {},
            "Error: unknown tool: drop_everything. Tools: list_tables, describe_table, "
            "foreign_keys, join_path, sample_rows, distinct_values, run_query, submit_sql",
        ),
        ("describe_table", {}, "Error: describe_table needs table_name"),
        (
            "describe_table",
            {"table": "Artist"},
            "Error: describe_table got unexpected argument table; it takes table_name",
        ),
        ("describe_table", {"table_name": 7}, "Error: table_name must be a string, got int"),
        ("list_tables", {"x": 1}, "Error: list_tables got unexpected argument x; it takes no arguments"),
        ("join_path", {"table_a": "Artist"}, "Error: join_path needs table_b"),
        ("run_query", ["SELECT 1"], "Error: run_query arguments must be a JSON object, got list"),
    ],
)
def test_bad_calls_are_error_text(box: ToolBox, name: str, args: object, text: str) -> None:
    out = box.call(name, args)  # type: ignore[arg-type]
    assert not out.ok and out.payload is None
    assert out.text == text


def test_foreign_key_to_a_missing_table_and_no_path(tmp_path: Path) -> None:
    path = tmp_path / "ghost.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE parent (id INTEGER PRIMARY KEY);
        CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id REFERENCES parent,
                            ghost_id REFERENCES ghost(id), phantom_id REFERENCES phantom);
        CREATE TABLE island (id INTEGER PRIMARY KEY);
        """
    )
    conn.close()
    with open_readonly(path) as db:
        box = ToolBox(db)
        out = box.call("foreign_keys", {"table_name": "child"})
        assert out.text.splitlines() == [
            "child.parent_id -> parent.id",
            "child.ghost_id -> ghost.id (no such table)",
            "child.phantom_id -> phantom.? (no such table)",
        ]
        assert box.call("join_path", {"table_a": "parent", "table_b": "child"}).text == (
            "parent → child\nchild.parent_id = parent.id"
        )
        assert box.call("join_path", {"table_a": "child", "table_b": "island"}).text == (
            "no foreign-key path between child and island"
        )


def test_describe_sqlite_master(box: ToolBox) -> None:
    out = box.call("describe_table", {"table_name": "sqlite_master"})
    assert (
        out.text
        == "CREATE TABLE sqlite_master (type text, name text, tbl_name text, rootpage integer, sql text)"
    )
    assert box.call("run_query", {"sql": "SELECT type, name FROM sqlite_master LIMIT 1"}).ok


def test_distinct_values_accepts_a_table_qualified_column(box: ToolBox) -> None:
    out = box.call("distinct_values", {"table_name": "Genre", "column_name": "genre.Name", "limit": 1})
    assert out.ok and out.text.splitlines()[0] == "Name"
    other = box.call("distinct_values", {"table_name": "Genre", "column_name": "Artist.Name"})
    assert not other.ok
