"""Which chart suits a result: column kinds read from the values, and the plot they call for.

Qt-free so the choice is tested on its own and the chat's answer card can ask "is there a numeric
column?" without loading the plotting library.

The rule (issue 13): a text or date column with one or more numeric columns is a bar chart over
the text (a line over the dates); two numeric columns and no label are a scatter of the first
against the second; a lone numeric column is a line over the row number.  The user may switch the
kind; the columns stay.  Kinds are judged from the values SQLite returned, not from declared types,
which a computed column (``count(*)``, ``strftime(...)``) does not have.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

ColumnKind = Literal["number", "date", "text", "empty"]
ChartKind = Literal["bar", "line", "scatter"]
CHART_KINDS: tuple[ChartKind, ...] = ("bar", "line", "scatter")
MAX_SERIES = 6
SAMPLE = 1000
"""Values looked at per column to judge its kind (a result can have a million rows)."""

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?\Z")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def column_kinds(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[ColumnKind]:
    """Each column's kind from (up to ``SAMPLE``) non-NULL values: all numbers → number, all
    ISO-8601 dates or date-times → date, anything else → text; no values at all → empty."""
    kinds: list[ColumnKind] = []
    for column in range(len(columns)):
        values = []
        for row in rows:
            value = row[column]
            if value is not None:
                values.append(value)
                if len(values) >= SAMPLE:
                    break
        if not values:
            kinds.append("empty")
        elif all(_is_number(v) for v in values):
            kinds.append("number")
        elif all(isinstance(v, str) and _DATE.match(v) for v in values):
            kinds.append("date")
        else:
            kinds.append("text")
    return kinds


def has_numeric_column(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> bool:
    return "number" in column_kinds(columns, rows)


@dataclass(frozen=True)
class ChartPlan:
    """What to draw: ``x`` is a column (None: the row number), ``ys`` the plotted columns."""

    kind: ChartKind
    x: int | None
    x_kind: ColumnKind
    ys: list[int] = field(default_factory=list)
    x_label: str = "row"
    y_labels: list[str] = field(default_factory=list)


def choose_chart(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], kind: ChartKind | None = None
) -> ChartPlan | None:
    """The chart for a result (``kind`` overrides the automatic choice); None without a numeric
    column, as there is nothing to plot."""
    kinds = column_kinds(columns, rows)
    numbers = [i for i, k in enumerate(kinds) if k == "number"]
    if not numbers:
        return None
    label = next((i for i, k in enumerate(kinds) if k in ("text", "date")), None)
    x: int | None
    if label is not None:
        x, ys = label, numbers[:MAX_SERIES]
        default: ChartKind = "line" if kinds[label] == "date" else "bar"
    elif len(numbers) >= 2:
        x, ys = numbers[0], numbers[1 : MAX_SERIES + 1]
        default = "scatter"
    else:
        x, ys = None, numbers[:1]
        default = "line"
    return ChartPlan(
        kind=kind or default,
        x=x,
        x_kind=kinds[x] if x is not None else "number",
        ys=ys,
        x_label=columns[x] if x is not None else "row",
        y_labels=[columns[i] for i in ys],
    )


def _timestamp(text: str) -> float:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # SQLite's dates carry no zone: read them as UTC
    return moment.timestamp()


def x_values(plan: ChartPlan, rows: Sequence[Sequence[Any]]) -> tuple[list[float], list[str]]:
    """The x coordinate of every row, and for a text column the category names (x = their index,
    in order of first appearance); unreadable x values become NaN."""
    if plan.x is None:
        return [float(i) for i in range(len(rows))], []
    column = plan.x
    if plan.x_kind == "text":
        categories: dict[str, int] = {}
        xs = []
        for row in rows:
            name = "NULL" if row[column] is None else str(row[column])
            xs.append(float(categories.setdefault(name, len(categories))))
        return xs, list(categories)
    out = []
    for row in rows:
        value = row[column]
        try:
            out.append(_timestamp(value) if plan.x_kind == "date" else float(value))
        except (TypeError, ValueError):
            out.append(math.nan)
    return out, []


def y_values(column: int, rows: Sequence[Sequence[Any]]) -> list[float]:
    """A numeric column's values; NULL (or anything not a number) as NaN, a gap in the plot."""
    return [float(row[column]) if _is_number(row[column]) else math.nan for row in rows]
