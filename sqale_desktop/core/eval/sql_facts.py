"""What a query reads, found by parsing it with sqlglot's SQLite dialect.

``tables(sql)`` names the database tables a query reads: a CTE's name, a table alias and a derived
table (subquery in FROM) are not tables, and a CTE that shadows a real table's name hides it.
sqlglot's scope analysis resolves exactly this (each scope's sources are either real tables or
other scopes).  ``string_literals(sql)`` lists the query's quoted string values, which the
harness looks for in what the tools showed the model.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=8192)
def tables(sql: str) -> frozenset[str]:
    """Lower-cased names of the tables ``sql`` reads (empty when it does not parse)."""
    tree = _parse(sql)
    if tree is None:
        return frozenset()
    from sqlglot import exp
    from sqlglot.errors import SqlglotError
    from sqlglot.optimizer.scope import traverse_scope

    found: set[str] = set()
    try:
        scopes = traverse_scope(tree)
    except (SqlglotError, KeyError, ValueError):
        scopes = []
    if scopes:
        for scope in scopes:
            for source in scope.sources.values():
                if isinstance(source, exp.Table) and source.name:
                    found.add(source.name.lower())
        return frozenset(found)
    # Scope analysis gives up on some statements (a bare VALUES, PRAGMA functions): fall back to
    # every table reference that is not a CTE's name.
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if name and name not in ctes:
            found.add(name)
    return frozenset(found)


@functools.lru_cache(maxsize=8192)
def string_literals(sql: str) -> tuple[str, ...]:
    """The distinct string literals of ``sql`` in order of appearance (empty when it does not parse)."""
    tree = _parse(sql)
    if tree is None:
        return ()
    from sqlglot import exp

    seen: dict[str, None] = {}
    for literal in tree.find_all(exp.Literal):
        if literal.is_string and literal.this != "":
            seen.setdefault(str(literal.this), None)
    return tuple(seen)


def _parse(sql: str) -> Any:
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        return sqlglot.parse_one(sql, read="sqlite")
    except SqlglotError:
        return None
