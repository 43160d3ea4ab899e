"""Read-only SQLite access: connection, authorizer guard, introspection, paged cursor; every
statement runs in a database worker process the app can kill (``worker.py``, ``process.py``)."""

from sqale_desktop.core.db.connection import QueryResult, ReadOnlyDatabase, open_readonly
from sqale_desktop.core.db.cursor import QueryCursor
from sqale_desktop.core.db.errors import (
    CorruptDatabase,
    DatabaseError,
    DatabaseUnreadable,
    NotADatabase,
    QueryDenied,
    QueryFailed,
    QueryInterrupted,
    QueryOutOfMemory,
    QueryTimeout,
    WorkerCrashed,
)
from sqale_desktop.core.db.identifiers import display_identifier, quote_identifier
from sqale_desktop.core.db.introspect import ColumnInfo, ForeignKey, Schema, TableInfo, load_schema, row_count
from sqale_desktop.core.db.render import render_cell

__all__ = [
    "ColumnInfo",
    "CorruptDatabase",
    "DatabaseError",
    "DatabaseUnreadable",
    "ForeignKey",
    "NotADatabase",
    "QueryCursor",
    "QueryDenied",
    "QueryFailed",
    "QueryInterrupted",
    "QueryOutOfMemory",
    "QueryResult",
    "QueryTimeout",
    "ReadOnlyDatabase",
    "Schema",
    "TableInfo",
    "WorkerCrashed",
    "display_identifier",
    "load_schema",
    "open_readonly",
    "quote_identifier",
    "render_cell",
    "row_count",
]
