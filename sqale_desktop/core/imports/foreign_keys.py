"""Foreign keys the data shows, between the tables of one folder or workbook.

A column ``customer_id`` (or ``customerid``, or ``customer``) in one table refers to ``customers``
(or ``customer``) when that table has a key, a column ``id`` or ``customer_id`` whose values are
all present and all different, of the same type, and every non-empty value of the column is one of
them.  Both tests matter: names alone link ``orders.user_id`` to a ``users`` table of other people,
values alone link any two columns of small integers.  The key becomes UNIQUE and the column a
declared FOREIGN KEY, so ``foreign_keys`` and ``join_path`` find the link; the reason is recorded
for the tab's details.
"""

from __future__ import annotations

from sqale_desktop.core.imports.builder import Builder, Column, StagedTable
from sqale_desktop.core.imports.types import INTEGER, TEXT


def _singular(word: str) -> str:
    w = word.casefold()
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith(("ses", "xes", "ches", "shes")):
        return w[:-2]
    if w.endswith("s") and not w.endswith("ss") and len(w) > 1:
        return w[:-1]
    return w


def _key_of(builder: Builder, table: StagedTable) -> Column | None:
    """The column of ``table`` that can be referred to: ``id`` or ``<singular>_id``, unique, no NULL."""
    stem = _singular(table.name)
    wanted = ("id", f"{stem}_id", f"{stem}id")
    for column in table.columns:
        if column.name.casefold() not in wanted or column.type not in (INTEGER, TEXT):
            continue
        expr = column.expression
        total, distinct, filled = builder.query(
            f"SELECT COUNT(*), COUNT(DISTINCT {expr}), COUNT({expr}) FROM {table.rows_from}"
        )[0]
        if total and total == distinct == filled:
            return column
    return None


def _forms(parent: StagedTable, key: Column) -> set[str]:
    """The column names (casefolded) that refer to ``parent`` by its ``key``."""
    stems = {_singular(parent.name), parent.name.casefold()}
    forms = {f"{s}_id" for s in stems} | {f"{s}id" for s in stems} | stems
    if key.name.casefold() != "id":
        forms.add(key.name.casefold())
    return forms


def infer(builder: Builder) -> None:
    """Add the foreign keys between ``builder``'s staged tables that their names and values show."""
    tables = builder.staged
    if len(tables) < 2:
        return
    keys = {t.name: _key_of(builder, t) for t in tables}
    # The parents each column name can refer to, in table order: looked up, not searched, so a
    # folder of 10,000 files costs 10,000 lookups per column name, not 10,000 squared.
    parents_by_name: dict[str, list[tuple[StagedTable, Column]]] = {}
    for parent in tables:
        key = keys[parent.name]
        if key is not None:
            for form in _forms(parent, key):
                parents_by_name.setdefault(form, []).append((parent, key))
    for child in tables:
        declared = {fk[0] for fk in child.foreign_keys}
        for column in child.columns:
            if column.name in declared:
                continue
            for parent, key in parents_by_name.get(column.name.casefold(), ()):
                if parent is child or key.type != column.type:
                    continue
                filled, missing = builder.query(
                    f"SELECT COUNT({column.expression}), COUNT({column.expression}) - "
                    f"COUNT(CASE WHEN {column.expression} IN "
                    f"(SELECT {key.expression} FROM {parent.rows_from}) "
                    f"THEN 1 END) FROM {child.rows_from}"
                )[0]
                if not filled or missing:
                    continue
                why = (
                    f"the name {column.name!r} points to {parent.name}, and all {filled:,} of its values "
                    f"are {parent.name}.{key.name} values (unique there)"
                )
                child.foreign_keys.append((column.name, parent.name, key.name, why))
                if not parent.primary_key and [key.name] not in parent.unique:
                    parent.unique.append([key.name])
                break
