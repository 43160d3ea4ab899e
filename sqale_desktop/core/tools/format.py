"""Every piece of text the model reads from a tool is written here, and only here.

The layouts follow the tool outputs visible in the SQaLe project's published episode replays:
rows as ``col | col`` lines under a header line, ``... (showing first 5 rows; more rows exist)``
when rows were cut, CREATE statements on one line, foreign keys as ``child.col -> parent.col``,
join paths as ``a → b → c``.  Compact on purpose: the model pays for every character.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlparse

from sqale_desktop.core.db.identifiers import display_identifier
from sqale_desktop.core.db.render import render_cell
from sqale_desktop.core.tools.payloads import JoinStep

# A tool turn is budgeted at 2,048 tokens; rows and key lists (which the model can narrow with a
# query or a table name) are cut here.  Table lists and CREATE statements are never cut.
MAX_TEXT_CHARS = 6000
ARROW = " → "


def error(message: str) -> str:
    """An error the model can read and act on."""
    return f"Error: {message}"


def rows(columns: Sequence[str], data: Sequence[Sequence[Any]], *, more: bool) -> str:
    """A header line, one line per row, and a note when more rows exist than are shown."""
    lines = [" | ".join(columns)]
    lines.extend(" | ".join(render_cell(v, for_model=True) for v in row) for row in data)
    if not data:
        lines.append("(no rows)")
    elif more:
        lines.append(f"... (showing first {len(data)} rows; more rows exist)")
    return clip("\n".join(lines))


def no_result_columns() -> str:
    return "(the statement returned no columns)"


def table_names(names: Sequence[str]) -> str:
    if not names:
        return "(no tables)"
    return ", ".join(names)  # never cut: no other tool can tell the model the missing names


def ddl(sql: str) -> str:
    """A CREATE statement on one line: comments dropped, whitespace runs collapsed."""
    return compact_sql(sql)


def compact_sql(sql: str) -> str:
    """Collapse whitespace and drop comments, never touching string literals or quoted names.

    Reads sqlparse's lexer tokens, not ``sqlparse.parse``: the parser's grouping refuses
    statements of more than 10,000 tokens (a table of 1,000+ columns), and the leaves are all
    that is needed here.
    """
    out: list[str] = []
    pending_space = False
    for ttype, value in sqlparse.lexer.tokenize(sql):  # type: ignore[no-untyped-call]
        if ttype in sqlparse.tokens.Whitespace or ttype in sqlparse.tokens.Newline or value.isspace():
            pending_space = True
            continue
        if ttype in sqlparse.tokens.Comment:
            pending_space = True
            continue
        if pending_space and out and not out[-1].endswith("(") and value not in (")", ","):
            out.append(" ")
        pending_space = False
        out.append(value)
    return "".join(out).strip()


def foreign_key_line(child: str, child_col: str, parent: str, parent_col: str | None) -> str:
    """``child.col -> parent.col``, names quoted only where SQL would need it."""
    target = display_identifier(parent_col) if parent_col else "?"
    source = f"{display_identifier(child)}.{display_identifier(child_col)}"
    return f"{source} -> {display_identifier(parent)}.{target}"


def foreign_keys(lines: Sequence[str], table: str | None) -> str:
    if not lines:
        return f"{table} has no foreign keys" if table else "no foreign keys in this database"
    return clip("\n".join(lines))


def join_path(tables: Sequence[str], joins: Sequence[JoinStep]) -> str:
    """``a → b → c`` then one line per hop with its join columns."""
    head = ARROW.join(display_identifier(t) for t in tables)
    lines = [head]
    for step in joins:
        conditions = " AND ".join(
            f"{display_identifier(step.to_table)}.{display_identifier(to_col)} = "
            f"{display_identifier(step.from_table)}.{display_identifier(from_col)}"
            for from_col, to_col in step.on
        )
        lines.append(conditions)
    return clip("\n".join(lines))


def same_table(table: str, self_references: Sequence[str]) -> str:
    text = f"{display_identifier(table)} is both ends: no join needed"
    if self_references:
        text += "\nself-references: " + "; ".join(self_references)
    return text


def no_join_path(table_a: str, table_b: str) -> str:
    return f"no foreign-key path between {display_identifier(table_a)} and {display_identifier(table_b)}"


def no_such_table(name: str, suggestions: Sequence[str]) -> str:
    if suggestions:
        return error(f"no such table: {name}. Did you mean: {', '.join(suggestions)}?")
    return error(f"no such table: {name}. Use list_tables to see the tables.")


def no_such_column(name: str, table: str, columns: Sequence[str], suggestions: Sequence[str]) -> str:
    if suggestions:
        return error(f"no such column: {name} in {table}. Did you mean: {', '.join(suggestions)}?")
    return error(f"no such column: {name} in {table}. Columns: {', '.join(columns)}")


def submitted() -> str:
    return "SQL submitted."


def clip(text: str) -> str:
    """Cut a whole result to ``MAX_TEXT_CHARS`` with a note saying so."""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    cut = text.rfind("\n", 0, MAX_TEXT_CHARS)
    cut = cut if cut > 0 else MAX_TEXT_CHARS
    return text[:cut] + f"\n... (output cut at {cut} of {len(text)} characters)"
