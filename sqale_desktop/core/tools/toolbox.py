"""``ToolBox``: the eight tools over one read-only database.

Each tool is a typed method returning a ``ToolOutput``; ``call(name, args)`` is the entry point
for a model's JSON call and never raises.  Known conditions (no such table, a denied or failing
query, a time-out) become error text the model can act on; a bug also becomes error text, with
its traceback in the log, so one broken call never ends an episode.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sqale_desktop.core.db.connection import ReadOnlyDatabase
from sqale_desktop.core.db.errors import DatabaseError
from sqale_desktop.core.db.identifiers import display_identifier, fold, quote_identifier
from sqale_desktop.core.db.introspect import Schema, TableInfo, cached_schema
from sqale_desktop.core.tools import format as fmt
from sqale_desktop.core.tools.arguments import BadArguments, check_call, parse_limit, unknown_tool
from sqale_desktop.core.tools.joins import JoinGraph, resolve_parent_columns
from sqale_desktop.core.tools.lookup import find_name, suggest
from sqale_desktop.core.tools.payloads import (
    DDLPayload,
    ForeignKeysPayload,
    JoinPathPayload,
    RowsPayload,
    SubmittedPayload,
    TablesPayload,
    ToolOutput,
)
from sqale_desktop.core.tools.specs import SPECS_BY_NAME

log = logging.getLogger(__name__)

DEFAULT_MAX_ROWS = 5  # run_query shows the first 5 rows, as in the training environment
DEFAULT_PAYLOAD_ROWS = 100  # rows kept for the UI's result card
DEFAULT_SAMPLE_LIMIT = 5
DEFAULT_DISTINCT_LIMIT = 20


# sqlite_master is not listed in itself, but the model reads it with run_query, so describe it.
_SCHEMA_TABLE_NAMES = frozenset({"sqlite_master", "sqlite_schema"})
_SCHEMA_TABLE_DDL = "CREATE TABLE {name} (type text, name text, tbl_name text, rootpage integer, sql text)"


class _ToolError(Exception):
    """A wrong call the tool reports as text (already formatted for the model)."""


class ToolBox:
    """The eight agent tools over ``db``.  ``submitted`` holds the last SQL accepted by submit_sql."""

    def __init__(
        self,
        db: ReadOnlyDatabase,
        *,
        max_rows: int = DEFAULT_MAX_ROWS,
        payload_rows: int = DEFAULT_PAYLOAD_ROWS,
    ) -> None:
        if max_rows < 1:
            raise ValueError("max_rows must be at least 1")
        self.db = db
        self.max_rows = max_rows
        self.payload_rows = max(payload_rows, max_rows)
        self.submitted: str | None = None

    # -- entry point ---------------------------------------------------------------------------

    def call(self, name: str, args: Mapping[str, Any] | None = None) -> ToolOutput:
        """Run the tool ``name`` with the model's ``args``; never raises."""
        try:
            spec = SPECS_BY_NAME.get(name) if isinstance(name, str) else None
            if spec is None:
                return _fail(unknown_tool(name))
            checked = check_call(spec, args)
            method = getattr(self, spec.name)
            result: ToolOutput = method(**checked)
            return result
        except BadArguments as exc:
            return _fail(str(exc))
        except Exception as exc:  # a bug: keep the episode going, keep the traceback in the log
            log.exception("tool %r failed with args %r", name, args)
            return _fail(f"internal error in {name}: {type(exc).__name__}: {exc}")

    # -- the eight tools -----------------------------------------------------------------------

    def list_tables(self) -> ToolOutput:
        """Every table and view name a query can use, in the file's order."""
        return self._guarded(self._list_tables)

    def describe_table(self, table_name: str) -> ToolOutput:
        """The table's CREATE statement, on one line."""
        return self._guarded(lambda: self._describe_table(table_name))

    def foreign_keys(self, table_name: str | None = None) -> ToolOutput:
        """Declared foreign keys as ``child.col -> parent.col`` lines, of one table or all."""
        return self._guarded(lambda: self._foreign_keys(table_name))

    def join_path(self, table_a: str, table_b: str) -> ToolOutput:
        """The shortest chain of foreign-key joins between two tables."""
        return self._guarded(lambda: self._join_path(table_a, table_b))

    def sample_rows(self, table_name: str, limit: int = DEFAULT_SAMPLE_LIMIT) -> ToolOutput:
        """The first ``limit`` rows of a table."""
        return self._guarded(lambda: self._sample_rows(table_name, limit))

    def distinct_values(
        self, table_name: str, column_name: str, limit: int = DEFAULT_DISTINCT_LIMIT
    ) -> ToolOutput:
        """Up to ``limit`` distinct values of one column."""
        return self._guarded(lambda: self._distinct_values(table_name, column_name, limit))

    def run_query(self, sql: str) -> ToolOutput:
        """The first rows of a read-only query."""
        return self._guarded(lambda: self._run_query(sql))

    def submit_sql(self, sql: str) -> ToolOutput:
        """Check that ``sql`` runs read-only and record it as the answer."""
        return self._guarded(lambda: self._submit_sql(sql))

    # -- schema --------------------------------------------------------------------------------

    @property
    def schema(self) -> Schema:
        """The schema, read once per database and kept while its schema_version stays the same
        (``introspect.cached_schema``); ``refresh()`` reads it again."""
        return cached_schema(self.db)

    def refresh(self) -> None:
        self.db.schema_cache = None

    def _join_graph(self) -> JoinGraph:
        """The schema's join graph, built once per reading of the schema and kept with it."""
        schema = self.schema
        graph = schema.derived.get("join_graph")
        if not isinstance(graph, JoinGraph):
            graph = schema.derived["join_graph"] = JoinGraph(schema)
        return graph

    def _table(self, name: str) -> TableInfo:
        schema = self.schema
        visible = schema.visible()
        names = [t.name for t in visible]
        found = find_name(name, names)
        if found is not None:
            table = schema.find(found)
            assert table is not None  # found among the schema's own names
            return table
        hidden = schema.find(name)  # sqlite_sequence and shadow tables still answer by name
        if hidden is not None:
            return hidden
        if fold(name) in _SCHEMA_TABLE_NAMES:
            return TableInfo(name=name, kind="table", sql=_SCHEMA_TABLE_DDL.format(name=name))
        raise _ToolError(fmt.no_such_table(name, suggest(name, names)))

    # -- implementations -----------------------------------------------------------------------

    def _list_tables(self) -> ToolOutput:
        names = [t.name for t in self.schema.visible()]
        return ToolOutput(fmt.table_names(names), True, TablesPayload(names))

    def _describe_table(self, table_name: str) -> ToolOutput:
        table = self._table(table_name)
        sql = table.sql or _synthesized_ddl(table)
        return ToolOutput(fmt.ddl(sql), True, DDLPayload(table.name, sql))

    def _foreign_keys(self, table_name: str | None) -> ToolOutput:
        schema = self.schema
        tables = [self._table(table_name)] if table_name else schema.visible()
        lines: list[str] = []
        for table in tables:
            for key in table.foreign_keys:
                parent = schema.find(key.ref_table)
                parent_cols: tuple[str | None, ...] = resolve_parent_columns(key, parent)
                if parent is None and not all(key.ref_columns):
                    parent_cols = tuple(None for _ in key.columns)
                for child_col, parent_col in zip(key.columns, parent_cols, strict=True):
                    line = fmt.foreign_key_line(table.name, child_col, key.ref_table, parent_col)
                    lines.append(line if parent is not None else f"{line} (no such table)")
        label = tables[0].name if table_name else None
        return ToolOutput(fmt.foreign_keys(lines, label), True, ForeignKeysPayload(lines))

    def _join_path(self, table_a: str, table_b: str) -> ToolOutput:
        start, goal = self._table(table_a), self._table(table_b)
        graph = self._join_graph()
        if fold(start.name) == fold(goal.name):
            self_refs = [
                fmt.foreign_key_line(start.name, c, start.name, p)
                for key in start.foreign_keys
                if fold(key.ref_table) == fold(start.name)
                for c, p in zip(key.columns, resolve_parent_columns(key, start), strict=True)
            ]
            return ToolOutput(fmt.same_table(start.name, self_refs), True, JoinPathPayload([start.name], []))
        steps = graph.path(start, goal)
        if steps is None:
            return ToolOutput(fmt.no_join_path(start.name, goal.name), True, JoinPathPayload([], []))
        tables = [start.name] + [step.to_table for step in steps]
        return ToolOutput(fmt.join_path(tables, steps), True, JoinPathPayload(tables, steps))

    def _sample_rows(self, table_name: str, limit: int) -> ToolOutput:
        limit = parse_limit(limit)
        table = self._table(table_name)
        sql = f"SELECT * FROM {quote_identifier(table.name)} LIMIT {limit + 1}"
        result = self.db.execute(sql, max_rows=limit)
        return _rows_output(result.columns, result.rows, result.truncated)

    def _distinct_values(self, table_name: str, column_name: str, limit: int) -> ToolOutput:
        limit = parse_limit(limit)
        table = self._table(table_name)
        if table.error is not None:
            raise _ToolError(fmt.error(table.error))
        names = [c.name for c in table.columns]
        column = find_name(column_name, names)
        prefix, dot, bare = column_name.rpartition(".")
        if column is None and dot and find_name(prefix, [table.name]):
            column = find_name(bare, names)  # "Customer.Country" names the table's own column
        if column is None:
            shown = display_identifier(table.name)
            raise _ToolError(fmt.no_such_column(column_name, shown, names, suggest(column_name, names)))
        sql = (
            f"SELECT DISTINCT {quote_identifier(column)} FROM {quote_identifier(table.name)} "
            f"LIMIT {limit + 1}"
        )
        result = self.db.execute(sql, max_rows=limit)
        return _rows_output(result.columns, result.rows, result.truncated)

    def _run_query(self, sql: str) -> ToolOutput:
        result = self.db.execute(sql, max_rows=self.payload_rows)
        if not result.columns:
            return ToolOutput(fmt.no_result_columns(), True, RowsPayload([], [], 0, False))
        shown = result.rows[: self.max_rows]
        more = result.truncated or len(result.rows) > self.max_rows
        payload = RowsPayload(result.columns, result.rows, result.row_count, result.truncated)
        return ToolOutput(fmt.rows(result.columns, shown, more=more), True, payload)

    def _submit_sql(self, sql: str) -> ToolOutput:
        result = self.db.execute(sql, max_rows=self.payload_rows)
        self.submitted = sql
        rows = RowsPayload(result.columns, result.rows, result.row_count, result.truncated)
        return ToolOutput(fmt.submitted(), True, SubmittedPayload(sql, rows))

    def _guarded(self, work: Any) -> ToolOutput:
        try:
            result: ToolOutput = work()
            return result
        except _ToolError as exc:
            return ToolOutput(str(exc), False, None)
        except BadArguments as exc:
            return _fail(str(exc))
        except DatabaseError as exc:
            return _fail(str(exc))


def _rows_output(columns: list[str], rows: list[tuple[Any, ...]], truncated: bool) -> ToolOutput:
    payload = RowsPayload(columns, rows, len(rows), truncated)
    return ToolOutput(fmt.rows(columns, rows, more=truncated), True, payload)


def _synthesized_ddl(table: TableInfo) -> str:
    """A CREATE statement for an object the file stores without one (SQLite's own tables)."""
    columns = ", ".join(f"{quote_identifier(c.name)} {c.type}".strip() for c in table.columns)
    return f"CREATE TABLE {quote_identifier(table.name)} ({columns})"


def _fail(message: str) -> ToolOutput:
    return ToolOutput(fmt.error(message), False, None)
