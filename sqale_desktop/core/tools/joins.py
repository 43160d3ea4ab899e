"""Shortest chains of foreign-key joins between two tables.

The declared foreign keys form an undirected graph (a join works in either direction).  A
breadth-first search finds the fewest hops; neighbours are visited in name order so the answer is
the same every time.  Composite keys join on all their columns; self-references are not hops;
keys that point at missing tables are left out, since nothing can be joined to them.
"""

from __future__ import annotations

from collections import deque

from sqale_desktop.core.db.identifiers import fold
from sqale_desktop.core.db.introspect import ForeignKey, Schema, TableInfo
from sqale_desktop.core.tools.payloads import JoinStep


class JoinGraph:
    """Adjacency of tables through declared foreign keys, built once per schema."""

    def __init__(self, schema: Schema) -> None:
        self._schema = schema
        # fold(name) -> fold(neighbour) -> (from_table, to_table, on pairs) for the first key found
        self._edges: dict[str, dict[str, JoinStep]] = {}
        for table in schema.tables:
            for key in table.foreign_keys:
                parent = schema.find(key.ref_table)
                if parent is None or fold(parent.name) == fold(table.name):
                    continue
                pairs = tuple(zip(key.columns, resolve_parent_columns(key, parent), strict=True))
                self._add(table.name, parent.name, pairs)
                self._add(parent.name, table.name, tuple((p, c) for c, p in pairs))

    def _add(self, src: str, dst: str, on: tuple[tuple[str, str], ...]) -> None:
        self._edges.setdefault(fold(src), {}).setdefault(fold(dst), JoinStep(src, dst, on))

    def path(self, start: TableInfo, goal: TableInfo) -> list[JoinStep] | None:
        """The hops from ``start`` to ``goal`` (empty when they are the same), or None."""
        a, b = fold(start.name), fold(goal.name)
        if a == b:
            return []
        previous: dict[str, JoinStep | None] = {a: None}
        queue = deque([a])
        while queue:
            node = queue.popleft()
            for neighbour in sorted(self._edges.get(node, {})):
                if neighbour in previous:
                    continue
                previous[neighbour] = self._edges[node][neighbour]
                if neighbour == b:
                    return _unwind(previous, b)
                queue.append(neighbour)
        return None


def resolve_parent_columns(key: ForeignKey, parent: TableInfo | None) -> tuple[str, ...]:
    """The parent columns of a key; a key written without them targets the parent's primary key."""
    if all(col is not None for col in key.ref_columns):
        return tuple(col for col in key.ref_columns if col is not None)
    primary = parent.primary_key if parent is not None else []
    if len(primary) == len(key.columns):
        return tuple(primary)
    return tuple("rowid" for _ in key.columns)


def _unwind(previous: dict[str, JoinStep | None], goal: str) -> list[JoinStep]:
    steps: list[JoinStep] = []
    node = goal
    while (step := previous[node]) is not None:
        steps.append(step)
        node = fold(step.from_table)
    steps.reverse()
    return steps
