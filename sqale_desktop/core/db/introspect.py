"""Reading a database's schema: tables and views, columns, keys, and per-object errors.

Real files misbehave one object at a time: a virtual table whose module is missing (spatialite,
vec0), a column with a collation SQLite lacks (``unicase``).  Such an object gets its error as
text in ``TableInfo.error`` and everything else is still described.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqale_desktop.core.db.connection import ReadOnlyDatabase
from sqale_desktop.core.db.errors import DatabaseError
from sqale_desktop.core.db.identifiers import fold, quote_identifier


@dataclass(frozen=True)
class ColumnInfo:
    """One column as ``PRAGMA table_xinfo`` reports it (``pk`` is its 1-based key position, or 0)."""

    name: str
    type: str
    notnull: bool
    default: str | None
    pk: int
    hidden: bool = False


@dataclass(frozen=True)
class ForeignKey:
    """A declared foreign key; ``ref_columns`` entries are None when it targets the parent's key."""

    table: str
    columns: tuple[str, ...]
    ref_table: str
    ref_columns: tuple[str | None, ...]


@dataclass
class TableInfo:
    """A table or view.  ``kind``: table, view, virtual or shadow (an FTS/vtable's storage)."""

    name: str
    kind: str
    sql: str | None
    columns: list[ColumnInfo] = field(default_factory=list)
    foreign_keys: list[ForeignKey] = field(default_factory=list)
    without_rowid: bool = False
    error: str | None = None

    @property
    def primary_key(self) -> list[str]:
        keyed = sorted((c for c in self.columns if c.pk), key=lambda c: c.pk)
        return [c.name for c in keyed]

    @property
    def is_internal(self) -> bool:
        """SQLite's own tables (sqlite_sequence, sqlite_stat1, ...)."""
        return fold(self.name).startswith("sqlite_")


@dataclass
class Schema:
    """Every table and view, in the file's own order."""

    tables: list[TableInfo]

    def find(self, name: str) -> TableInfo | None:
        """The object called ``name``, compared the way SQLite compares names."""
        key = fold(name)
        for table in self.tables:
            if table.name == name:
                return table
        for table in self.tables:
            if fold(table.name) == key:
                return table
        return None

    def visible(self) -> list[TableInfo]:
        """The objects a person or the model would query: no SQLite internals, no shadow tables."""
        return [t for t in self.tables if not t.is_internal and t.kind != "shadow"]


def load_schema(db: ReadOnlyDatabase) -> Schema:
    """Describe every table and view; per-object failures end up in ``TableInfo.error``."""
    master = db.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY rowid",
        max_rows=1_000_000,
    )
    kinds = _table_list(db)
    tables: list[TableInfo] = []
    for kind, name, sql in master.rows:
        listed_kind, without_rowid = kinds.get(name, (None, False))
        if listed_kind is None:
            listed_kind = "virtual" if kind == "table" and _is_virtual(sql) else kind
        table = TableInfo(name=name, kind=listed_kind, sql=sql, without_rowid=without_rowid)
        _fill_columns(db, table)
        tables.append(table)
    return Schema(tables)


def row_count(db: ReadOnlyDatabase, table: str) -> int:
    """``count(*)`` of a table or view, under the database's time limit."""
    result = db.execute(f"SELECT count(*) FROM {quote_identifier(table)}")
    value = result.rows[0][0]
    return int(value)


def _table_list(db: ReadOnlyDatabase) -> dict[str, tuple[str, bool]]:
    """``PRAGMA table_list`` kinds (table/view/virtual/shadow) and WITHOUT ROWID flags, if any."""
    try:
        result = db.execute("SELECT name, type, wr FROM pragma_table_list WHERE schema = 'main'", 1_000_000)
    except DatabaseError:
        return {}  # older SQLite, or a schema table_list cannot read: fall back to sqlite_master
    return {name: (kind, bool(wr)) for name, kind, wr in result.rows}


def _is_virtual(sql: str | None) -> bool:
    return bool(sql) and " ".join((sql or "").split()[:3]).upper().startswith("CREATE VIRTUAL TABLE")


def _fill_columns(db: ReadOnlyDatabase, table: TableInfo) -> None:
    try:
        columns = db.execute(
            'SELECT name, type, "notnull", dflt_value, pk, hidden FROM pragma_table_xinfo(?)',
            10_000,
            (table.name,),
        )
        table.columns = [
            ColumnInfo(
                name=name,
                type=type_ or "",
                notnull=bool(notnull),
                default=default,
                pk=int(pk),
                hidden=bool(hidden),
            )
            for name, type_, notnull, default, pk, hidden in columns.rows
            if not hidden or table.kind != "virtual"
        ]
        keys = db.execute(
            'SELECT id, seq, "table", "from", "to" FROM pragma_foreign_key_list(?) ORDER BY id, seq',
            10_000,
            (table.name,),
        )
    except DatabaseError as exc:
        table.error = str(exc)
        return
    grouped: dict[int, list[tuple[str, str, str | None]]] = {}
    for key_id, _seq, parent, child_col, parent_col in keys.rows:
        grouped.setdefault(int(key_id), []).append((parent, child_col, parent_col))
    table.foreign_keys = [
        ForeignKey(
            table=table.name,
            columns=tuple(child for _, child, _ in pairs),
            ref_table=pairs[0][0],
            ref_columns=tuple(parent for _, _, parent in pairs),
        )
        for _, pairs in sorted(grouped.items(), reverse=True)  # SQLite numbers the last-declared key 0
    ]
