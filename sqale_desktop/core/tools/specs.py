"""The eight tools the SQaLe models were trained with: names, arguments and one-line descriptions.

The order and the descriptions follow the model card's protocol table, so a prompt rebuilt from
these specs lists the tools the way training did.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolArg:
    """One argument: ``type`` is ``"string"`` or ``"integer"``."""

    name: str
    type: str
    required: bool
    description: str


@dataclass(frozen=True)
class ToolSpec:
    """A tool's name, its arguments in order, and what it returns."""

    name: str
    args: tuple[ToolArg, ...]
    description: str


_TABLE = ToolArg("table_name", "string", True, "a table name from list_tables")
_SQL = ToolArg("sql", "string", True, "one read-only SQLite statement")

TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("list_tables", (), "every table name"),
    ToolSpec("describe_table", (_TABLE,), "the table's CREATE TABLE statement"),
    ToolSpec(
        "foreign_keys",
        (ToolArg("table_name", "string", False, "a table name; all tables when omitted"),),
        "declared foreign keys as child.col -> parent.col; table_name is optional",
    ),
    ToolSpec(
        "join_path",
        (
            ToolArg("table_a", "string", True, "the table to start from"),
            ToolArg("table_b", "string", True, "the table to reach"),
        ),
        "the shortest chain of foreign-key joins between two tables",
    ),
    ToolSpec(
        "sample_rows",
        (_TABLE, ToolArg("limit", "integer", False, "how many rows (default 5)")),
        "a few rows of a table",
    ),
    ToolSpec(
        "distinct_values",
        (
            _TABLE,
            ToolArg("column_name", "string", True, "a column of that table"),
            ToolArg("limit", "integer", False, "how many values (default 20)"),
        ),
        "the distinct values of a column",
    ),
    ToolSpec("run_query", (_SQL,), "the first rows of a read-only query"),
    ToolSpec("submit_sql", (_SQL,), "records the final answer and ends the episode"),
)

TOOL_NAMES: tuple[str, ...] = tuple(spec.name for spec in TOOL_SPECS)
SPECS_BY_NAME: dict[str, ToolSpec] = {spec.name: spec for spec in TOOL_SPECS}
