"""What each tool hands back: the model's text, success, and a typed payload for the UI's cards."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RowsPayload:
    """Rows for a result card; ``truncated`` is True when the query had more rows than these."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    row_count: int
    truncated: bool


@dataclass(frozen=True)
class DDLPayload:
    """The CREATE statement of a table or view, as stored in the file (not compacted)."""

    table: str
    sql: str


@dataclass(frozen=True)
class JoinStep:
    """One hop of a join path: ``from_table`` joins ``to_table`` on ``from.col = to.col`` pairs."""

    from_table: str
    to_table: str
    on: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class JoinPathPayload:
    """The chain of tables from ``table_a`` to ``table_b`` and the join of each hop."""

    tables: list[str]
    joins: list[JoinStep]


@dataclass(frozen=True)
class TablesPayload:
    """The names ``list_tables`` returned."""

    names: list[str]


@dataclass(frozen=True)
class ForeignKeysPayload:
    """The ``child.col -> parent.col`` lines ``foreign_keys`` returned."""

    lines: list[str]


@dataclass(frozen=True)
class SubmittedPayload:
    """The SQL the model submitted as its answer, and the rows it returned when it ran."""

    sql: str
    result: RowsPayload | None = None


@dataclass(frozen=True)
class ToolOutput:
    """A tool's result: ``text`` is exactly what the model reads; ``ok`` is False for error text."""

    text: str
    ok: bool
    payload: object | None = field(default=None)
