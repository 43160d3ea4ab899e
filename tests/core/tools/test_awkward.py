"""The tools on files that misbehave: odd identifiers, missing modules and collations, FTS
shadow tables, composite keys, and schemas of hundreds of tables."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.tools import TOOL_NAMES, ToolBox
from tests.helpers import shared_data

ODD_NAMES = ["123_starts_with_digits", "Table With Space In Name", "table/with/slashes.csv", "select"]


def _every_tool_on(box: ToolBox, table: str) -> dict[str, bool]:
    column = box.schema.find(table).columns[0].name  # type: ignore[union-attr]
    quoted = '"' + table.replace('"', '""') + '"'
    calls = {
        "describe_table": {"table_name": table},
        "foreign_keys": {"table_name": table},
        "join_path": {"table_a": table, "table_b": table},
        "sample_rows": {"table_name": table, "limit": 2},
        "distinct_values": {"table_name": table, "column_name": column, "limit": 2},
        "run_query": {"sql": f"SELECT * FROM {quoted} LIMIT 2"},
        "submit_sql": {"sql": f"SELECT count(*) FROM {quoted}"},
    }
    return {name: box.call(name, args).ok for name, args in calls.items()}


@pytest.mark.parametrize("table", ODD_NAMES)
def test_odd_identifiers_work_in_every_tool(table: str) -> None:
    with open_readonly(shared_data("awkward/datasette_fixtures.sqlite")) as db:
        box = ToolBox(db)
        assert table in box.call("list_tables").text
        assert all(_every_tool_on(box, table).values())


def test_unicode_and_embedded_quotes(tmp_path: Path) -> None:
    path = tmp_path / "odd.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE "Käse ""Gouda"" 🧀" ("Prix €" REAL, "it's" TEXT, "[x]" INTEGER);
        INSERT INTO "Käse ""Gouda"" 🧀" VALUES (1.5, 'oui', 1), (2.0, 'non', 2);
        CREATE TABLE "[select]" (id INTEGER PRIMARY KEY, "Käse_id" REFERENCES "Käse ""Gouda"" 🧀");
        """
    )
    conn.close()
    with open_readonly(path) as db:
        box = ToolBox(db)
        for table in ('Käse "Gouda" 🧀', "[select]"):
            assert all(_every_tool_on(box, table).values()), table
        rows = box.call("distinct_values", {"table_name": 'käse "gouda" 🧀', "column_name": "prix €"})
        assert rows.text == "Prix €\n1.5\n2.0"
        path_text = box.call("join_path", {"table_a": "[select]", "table_b": 'Käse "Gouda" 🧀'}).text
        assert path_text.splitlines()[0] == '"[select]" → "Käse ""Gouda"" 🧀"'


def test_whitespace_table_names() -> None:
    with open_readonly(shared_data("awkward/sakila_whitespace.sqlite")) as db:
        box = ToolBox(db)
        assert "film actor" in box.call("list_tables").text.split(", ")
        assert all(_every_tool_on(box, "film actor").values())
        fks = box.call("foreign_keys", {"table_name": "film actor"}).text
        assert '"film actor".' in fks


def test_missing_virtual_table_modules_fail_only_that_table() -> None:
    with open_readonly(shared_data("awkward/datasette_vec.sqlite")) as db:
        box = ToolBox(db)
        assert box.call("describe_table", {"table_name": "vec_vectors"}).ok
        out = box.call("sample_rows", {"table_name": "vec_vectors"})
        assert out.text == "Error: no such module: vec0"
        assert box.call("sample_rows", {"table_name": "vectors"}).ok
        out = box.call("distinct_values", {"table_name": "vec_vectors", "column_name": "x"})
        assert out.text == "Error: no such module: vec0"


def test_missing_collation_fails_only_that_table() -> None:
    with open_readonly(shared_data("awkward/anki_schema17.anki2")) as db:
        box = ToolBox(db)
        assert box.call("sample_rows", {"table_name": "notes"}).ok
        assert box.call("describe_table", {"table_name": "tags"}).ok
        out = box.call("distinct_values", {"table_name": "tags", "column_name": "tag"})
        assert out.text == "Error: no such collation sequence: unicase"


def test_fts_tables_are_queryable_and_shadow_tables_are_not_listed() -> None:
    with open_readonly(shared_data("awkward/sakila_fts5.sqlite")) as db:
        box = ToolBox(db)
        names = box.call("list_tables").text.split(", ")
        assert "actor_fts" in names and "actor_fts_data" not in names
        match = "SELECT count(*) FROM actor_fts WHERE actor_fts MATCH 'PENELOPE'"
        out = box.call("run_query", {"sql": match})
        assert out.ok and out.text.splitlines()[1].isdigit()
        assert box.call("describe_table", {"table_name": "actor_fts_data"}).ok  # still answers by name


def test_composite_foreign_keys_join_on_every_column() -> None:
    with open_readonly(shared_data("awkward/proj_9.1.1.db")) as db:
        box = ToolBox(db)
        out = box.call("join_path", {"table_a": "axis", "table_b": "coordinate_system"})
        assert out.text == (
            "axis → coordinate_system\n"
            "coordinate_system.auth_name = axis.coordinate_system_auth_name AND "
            "coordinate_system.code = axis.coordinate_system_code"
        )
        longer = box.call("join_path", {"table_a": "grid_transformation", "table_b": "ellipsoid"})
        chain = "grid_transformation → geodetic_crs → geodetic_datum → ellipsoid"
        assert longer.text.splitlines()[0] == chain
        # The path must be a real join: run it.
        sql = (
            "SELECT count(*) FROM grid_transformation JOIN geodetic_crs ON "
            + " JOIN geodetic_datum ON ".join(longer.text.splitlines()[1:3])
            + " JOIN ellipsoid ON "
            + longer.text.splitlines()[3]
        )
        assert box.call("run_query", {"sql": sql}).ok


def test_big_schema_without_keys() -> None:
    with open_readonly(shared_data("awkward/ios__powerlog_84E2141B.PLSQL.sqlite")) as db:
        box = ToolBox(db)
        names = box.call("list_tables").text
        assert names.count(", ") >= 300 or "output cut" in names
        tables = box.schema.visible()
        out = box.call("join_path", {"table_a": tables[0].name, "table_b": tables[-1].name})
        assert out.ok and out.text.startswith("no foreign-key path between")


def test_join_path_across_a_400_table_chain(tmp_path: Path) -> None:
    path = tmp_path / "chain.db"
    statements = ["CREATE TABLE t0 (id INTEGER PRIMARY KEY);"]
    statements += [
        f"CREATE TABLE t{i} (id INTEGER PRIMARY KEY, prev_id REFERENCES t{i - 1}(id));" for i in range(1, 400)
    ]
    # A shortcut from t0 straight to t200 makes the shortest path skip 199 hops.
    statements.append(
        "CREATE TABLE shortcut (id INTEGER PRIMARY KEY, a REFERENCES t0(id), b REFERENCES t200(id));"
    )
    conn = sqlite3.connect(path)
    conn.executescript("BEGIN;\n" + "\n".join(statements) + "\nCOMMIT;")
    conn.close()
    with open_readonly(path) as db:
        box = ToolBox(db)
        out = box.call("join_path", {"table_a": "t0", "table_b": "t203"})
        assert out.text.splitlines()[0] == "t0 → shortcut → t200 → t201 → t202 → t203"
        far = box.call("join_path", {"table_a": "t399", "table_b": "t0"})
        assert far.text.splitlines()[0].count("→") == 199 + 2


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)
arg_names = st.sampled_from(["table_name", "column_name", "limit", "sql", "table_a", "table_b", "x"])


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(
    name=st.one_of(st.sampled_from(TOOL_NAMES), st.text(max_size=15)),
    args=st.one_of(st.dictionaries(arg_names, json_values, max_size=4), json_values),
)
def test_call_never_raises(chinook: Path, name: str, args: object) -> None:
    with open_readonly(chinook, time_limit_s=2) as db:
        out = ToolBox(db).call(name, args)  # type: ignore[arg-type]
    assert isinstance(out.text, str) and out.text
    assert out.ok or out.text.startswith("Error: ")
    json.dumps(out.text)
