"""Reading a database's schema: tables and views, columns, keys, and per-object errors.

Real files misbehave one object at a time: a virtual table whose module is missing (spatialite,
vec0), a column with a collation SQLite lacks (``unicase``).  Such an object gets its error as
text in ``TableInfo.error`` and everything else is still described.

Large schemas (10,000 tables) are read with two statements (columns and foreign keys of every
object at once, through the pragma table functions), not two per table; only when one of those
fails is every object read on its own, to find the one that is broken.  ``cached_schema`` keeps
the result on the database and reads it again only when ``PRAGMA schema_version`` moves (any
program changing the schema bumps it), so the tools of every episode share one reading; where
the file's header holds the committed cookie (rollback-journal mode) it is read from there.

A database made by importing files holds one table that is not data: ``_columns``, the import's
note of each column's name and type in its source.  It is not among the ``visible()`` tables (the
schema tree's, ``list_tables``'s), yet still answers by name (``describe_table``, any query), and
the original names it holds are on the columns (``ColumnInfo.original``), which the tree shows.
A database that was not imported has no such table, so for it nothing here changes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from sqale_desktop.core.db.connection import ReadOnlyDatabase
from sqale_desktop.core.db.errors import DatabaseError
from sqale_desktop.core.db.identifiers import fold, quote_identifier

IMPORT_NOTE = "_columns"
_IMPORT_NOTE_COLUMNS = (
    ("table_name", "TEXT"),
    ("column_name", "TEXT"),
    ("original_name", "TEXT"),
    ("position", "INTEGER"),
    ("type", "TEXT"),
)


@dataclass(frozen=True)
class ColumnInfo:
    """One column as ``PRAGMA table_xinfo`` reports it (``pk`` is its 1-based key position, or 0)."""

    name: str
    type: str
    notnull: bool
    default: str | None
    pk: int
    hidden: bool = False
    original: str | None = None
    """The column's name in the file it was imported from, where the import had to change it."""


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

    @property
    def is_import_note(self) -> bool:
        """The ``_columns`` table an import writes beside the data (its exact name and columns)."""
        return (
            self.name == IMPORT_NOTE
            and self.kind == "table"
            and tuple((c.name, c.type) for c in self.columns) == _IMPORT_NOTE_COLUMNS
        )


@dataclass
class Schema:
    """Every table and view, in the file's own order."""

    tables: list[TableInfo]
    _index: tuple[int, dict[str, TableInfo], dict[str, TableInfo]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    # Things computed from this schema and kept with it (the tools' join graph), so that they
    # are computed once per reading of the schema, not once per tool box.
    derived: dict[str, object] = field(default_factory=dict, init=False, repr=False, compare=False)

    def find(self, name: str) -> TableInfo | None:
        """The object called ``name``, compared the way SQLite compares names."""
        exact, folded = self._lookup()
        found = exact.get(name)
        return found if found is not None else folded.get(fold(name))

    def _lookup(self) -> tuple[dict[str, TableInfo], dict[str, TableInfo]]:
        """Name indexes, built on first use (rebuilt if ``tables`` changed length)."""
        if self._index is None or self._index[0] != len(self.tables):
            exact: dict[str, TableInfo] = {}
            folded: dict[str, TableInfo] = {}
            for table in self.tables:
                exact.setdefault(table.name, table)
                folded.setdefault(fold(table.name), table)
            self._index = (len(self.tables), exact, folded)
        return self._index[1], self._index[2]

    def visible(self) -> list[TableInfo]:
        """The objects a person or the model would query: no SQLite internals, no shadow tables,
        no import note."""
        return [t for t in self.tables if not t.is_internal and t.kind != "shadow" and not t.is_import_note]


_ALL_COLUMNS = (
    'SELECT m.name, p.name, p.type, p."notnull", p.dflt_value, p.pk, p.hidden '
    "FROM sqlite_master AS m JOIN pragma_table_xinfo(m.name) AS p "
    "WHERE m.type IN ('table', 'view') ORDER BY m.rowid, p.cid"
)
_ALL_KEYS = (
    'SELECT m.name, f.id, f.seq, f."table", f."from", f."to" '
    "FROM sqlite_master AS m JOIN pragma_foreign_key_list(m.name) AS f "
    "WHERE m.type = 'table' ORDER BY m.rowid, f.id, f.seq"
)
_MANY = 100_000_000
# The database header: its first 100 bytes; the schema cookie is the big-endian integer at 40.
_HEADER_BYTES = 100
_SCHEMA_COOKIE = 40


def cached_schema(db: ReadOnlyDatabase) -> Schema:
    """The schema of ``db``, read once and kept until the file's schema changes (see the docstring)."""
    version = _header_schema_version(db)
    if version is None:
        version = db.execute("PRAGMA schema_version").rows[0][0]
    cached = db.schema_cache
    if cached is not None and cached[0] == version:
        schema: Schema = cached[1]
        return schema
    schema = load_schema(db)
    db.schema_cache = (version, schema)
    return schema


def _header_schema_version(db: ReadOnlyDatabase) -> int | None:
    """The schema cookie in the file's header, where it is exactly ``PRAGMA schema_version``.

    Every tool call asks for the schema, and a statement costs a round trip to the database
    worker; the header's four bytes cost a read.  In rollback-journal mode a commit writes the
    header in the file, so the cookie there is the committed one (one caught mid-commit only
    causes an early re-read).  In WAL mode page 1 may be newer in the ``-wal``, and an immutable
    open ignores the file's changes on purpose: both ask SQLite (None here).
    """
    if db.immutable:
        return None
    try:
        with db.path.open("rb") as handle:
            header = handle.read(_HEADER_BYTES)
    except OSError:
        return None
    if len(header) < _HEADER_BYTES or header[18] != 1 or header[19] != 1:
        return None  # WAL (2), or not a header this reading understands
    return int.from_bytes(header[_SCHEMA_COOKIE : _SCHEMA_COOKIE + 4], "big")


def load_schema(db: ReadOnlyDatabase) -> Schema:
    """Describe every table and view; per-object failures end up in ``TableInfo.error``.

    The whole reading is under the database's time limit, not only each statement: 3,000 chained
    views make SQLite resolve each view's columns through the chain (``pragma_table_list`` alone
    ran 120 s), and a statement each at the limit took 23.7 s at a 1 s limit.  Past the limit,
    no further statement starts; the objects not yet described say so in their error."""
    deadline = time.monotonic() + db.time_limit_s
    master = db.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY rowid",
        max_rows=_MANY,
    )
    kinds = _table_list(db)
    tables: list[TableInfo] = []
    for kind, name, sql in master.rows:
        listed_kind, without_rowid = kinds.get(name, (None, False))
        if listed_kind is None:
            listed_kind = "virtual" if kind == "table" and _is_virtual(sql) else kind
        tables.append(TableInfo(name=name, kind=listed_kind, sql=sql, without_rowid=without_rowid))
    try:
        if time.monotonic() > deadline:
            raise DatabaseError("the schema read passed the time limit")  # each object: below
        columns = db.execute(_ALL_COLUMNS, max_rows=_MANY).rows
        keys = db.execute(_ALL_KEYS, max_rows=_MANY).rows
    except DatabaseError:
        for table in tables:  # one object is broken: read each alone so the others still work
            if time.monotonic() > deadline:
                table.error = (
                    f"not described: reading the schema passed the time limit ({db.time_limit_s:g} s)"
                )
            else:
                _fill_columns(db, table)
        return _with_original_names(db, Schema(tables))
    by_name = {table.name: table for table in tables}
    for owner, name, type_, notnull, default, pk, hidden in columns:
        described = by_name.get(owner)
        if described is not None and (not hidden or described.kind != "virtual"):
            described.columns.append(_column(name, type_, notnull, default, pk, hidden))
    grouped: dict[str, list[tuple[int, str, str, str | None]]] = {}
    for owner, key_id, _seq, parent, child_col, parent_col in keys:
        grouped.setdefault(owner, []).append((int(key_id), parent, child_col, parent_col))
    for owner, rows in grouped.items():
        if owner in by_name:
            by_name[owner].foreign_keys = _keys(owner, rows)
    return _with_original_names(db, Schema(tables))


def _with_original_names(db: ReadOnlyDatabase, schema: Schema) -> Schema:
    """``schema`` with each renamed column's name in its source, read from the import note (a
    database without one is returned as it is, without a statement)."""
    note = schema.find(IMPORT_NOTE)
    if note is None or not note.is_import_note:
        return schema
    try:
        rows = db.execute(
            f"SELECT table_name, column_name, original_name FROM {IMPORT_NOTE} "
            "WHERE original_name IS NOT column_name",
            max_rows=_MANY,
        ).rows
    except DatabaseError:
        return schema  # the note is unreadable: the data tables are still described
    originals = {(table, column): original for table, column, original in rows}
    for table in schema.tables:
        if any((table.name, c.name) in originals for c in table.columns):
            table.columns = [
                replace(c, original=originals[(table.name, c.name)])
                if (table.name, c.name) in originals
                else c
                for c in table.columns
            ]
    return schema


def _column(
    name: str, type_: str | None, notnull: int, default: str | None, pk: int, hidden: int
) -> ColumnInfo:
    return ColumnInfo(
        name=name, type=type_ or "", notnull=bool(notnull), default=default, pk=int(pk), hidden=bool(hidden)
    )


def _keys(table: str, rows: list[tuple[int, str, str, str | None]]) -> list[ForeignKey]:
    grouped: dict[int, list[tuple[str, str, str | None]]] = {}
    for key_id, parent, child_col, parent_col in rows:
        grouped.setdefault(key_id, []).append((parent, child_col, parent_col))
    return [
        ForeignKey(
            table=table,
            columns=tuple(child for _, child, _ in pairs),
            ref_table=pairs[0][0],
            ref_columns=tuple(parent for _, _, parent in pairs),
        )
        for _, pairs in sorted(grouped.items(), reverse=True)  # SQLite numbers the last-declared key 0
    ]


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
            _column(name, type_, notnull, default, pk, hidden)
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
    table.foreign_keys = _keys(table.name, [(int(k), p, c, t) for k, _seq, p, c, t in keys.rows])
