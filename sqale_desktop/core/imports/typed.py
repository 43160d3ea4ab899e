"""Parquet files and DuckDB databases: sources whose columns already carry types.

Both are read as Arrow record batches (``pyarrow`` for Parquet; DuckDB hands its results over as
Arrow without a copy), so one mapping serves both.  The libraries are imported only when such a
file is opened: they are large, and a plain ``query`` never needs them.

Arrow type → SQLite: integers INTEGER (an unsigned 64-bit value past SQLite's range becomes text, to
stay exact), floats REAL, booleans BOOLEAN (0/1), strings TEXT, binary TEXT when it is UTF-8 and
BLOB when not, dates/times/timestamps ISO-8601 text (Arrow's own formatting, which also covers
years Python's ``datetime`` cannot hold), decimals INTEGER (scale 0), REAL (up to 15 digits) or
exact TEXT, and nested lists/structs/maps JSON text (with a note saying so).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqale_desktop.core.imports.progress import ImportFailed, Meter
from sqale_desktop.core.imports.types import BOOLEAN, DATE, DATETIME, INTEGER, REAL, TEXT, TIME

BATCH_ROWS = 50_000
# How a DuckDB file is opened: nothing outside it is read (no file, glob, URL or extension; DuckDB's
# ``enable_external_access``) and no statement can turn that back on (``lock_configuration``).
DUCKDB_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}
_INT64_MAX = 2**63 - 1


@dataclass
class TypedTable:
    """A table whose column types are known: ``columns`` (name, declared type), rows as tuples."""

    name: str
    columns: list[tuple[str, str]]
    batches: Iterator[list[tuple[Any, ...]]]
    notes: list[str] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    unique: list[list[str]] = field(default_factory=list)
    # (columns, referenced table, referenced columns), as the source declared them
    foreign_keys: list[tuple[list[str], str, list[str]]] = field(default_factory=list)
    # The same rows as Arrow: the schema, a function that reads the record batches again from the
    # start each time it is called, and the bytes of the source read so far (for the fast path,
    # core/imports/fast_typed.py, which converts them without a Python object per cell).
    arrow_schema: Any = None
    arrow_batches: Callable[[], Iterator[Any]] | None = None
    position: Callable[[], int] = lambda: 0
    rows_hint: int | None = None  # the rows the source says it holds, when it says so cheaply


Converter = Callable[[Any], list[Any]]


def _plan(arrow_type: Any) -> tuple[str, Converter, str | None]:
    """(declared type, a function from an Arrow array to cell values, a note or None)."""
    import pyarrow as pa
    import pyarrow.types as t

    if t.is_dictionary(arrow_type):
        declared, convert, note = _plan(arrow_type.value_type)
        return declared, lambda a: convert(a.dictionary_decode()), note
    if t.is_boolean(arrow_type):
        return BOOLEAN, lambda a: a.to_pylist(), None
    if t.is_unsigned_integer(arrow_type) and arrow_type.bit_width == 64:
        return INTEGER, lambda a: [v if v is None or v <= _INT64_MAX else str(v) for v in a.to_pylist()], None
    if t.is_integer(arrow_type):
        return INTEGER, lambda a: a.to_pylist(), None
    if t.is_floating(arrow_type):
        return REAL, lambda a: a.to_pylist(), None
    if t.is_string(arrow_type) or t.is_large_string(arrow_type):
        return TEXT, lambda a: a.to_pylist(), None
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type) or t.is_fixed_size_binary(arrow_type):
        return TEXT, lambda a: [_text_or_bytes(v) for v in a.to_pylist()], None
    if t.is_date(arrow_type):
        return DATE, lambda a: a.cast(pa.string()).to_pylist(), None
    if t.is_timestamp(arrow_type):
        return DATETIME, _timestamps, None
    if t.is_time(arrow_type):
        return TIME, lambda a: a.cast(pa.string()).to_pylist(), None
    if t.is_decimal(arrow_type):
        if arrow_type.scale == 0 and arrow_type.precision <= 18:
            return INTEGER, lambda a: [None if v is None else int(v) for v in a.to_pylist()], None
        if arrow_type.precision <= 15:
            return REAL, lambda a: [None if v is None else float(v) for v in a.to_pylist()], None
        return (
            TEXT,
            lambda a: [None if v is None else str(v) for v in a.to_pylist()],
            (f"decimal({arrow_type.precision},{arrow_type.scale}) kept as exact text"),
        )
    if t.is_nested(arrow_type) or t.is_map(arrow_type):
        return (
            TEXT,
            lambda a: [
                None if v is None else json.dumps(v, default=str, ensure_ascii=False) for v in a.to_pylist()
            ],
            "nested values stored as JSON text",
        )
    if t.is_null(arrow_type):
        return TEXT, lambda a: [None] * len(a), None
    return TEXT, lambda a: [None if v is None else str(v) for v in a.to_pylist()], None


def _timestamps(array: Any) -> list[Any]:
    """ISO-8601 text (``2024-01-31 12:30:00.000001``) for any year: Arrow's ``strftime`` formats
    what both Python's ``datetime`` and Arrow's cast to string refuse (INT96 years past 9999)."""
    import pyarrow.compute as pc

    return pc.strftime(array, format="%Y-%m-%d %H:%M:%S").to_pylist()  # type: ignore[no-any-return]


def _text_or_bytes(value: bytes | None) -> str | bytes | None:
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value


def arrow_table(
    name: str, schema: Any, batches: Callable[[], Iterator[Any]], meter: Meter, position: Callable[[], int]
) -> TypedTable:
    """A :class:`TypedTable` over the Arrow record batches of ``schema`` that ``batches()`` reads."""
    plans = [_plan(f.type) for f in schema]
    columns = [(f.name, plan[0]) for f, plan in zip(schema, plans, strict=True)]
    notes = [f"{f.name}: {plan[2]}" for f, plan in zip(schema, plans, strict=True) if plan[2]]

    def rows() -> Iterator[list[tuple[Any, ...]]]:
        for batch in batches():
            cells = [plan[1](batch.column(i)) for i, plan in enumerate(plans)]
            out = list(zip(*cells, strict=True)) if cells else []
            yield out
            meter.count(len(out), position())

    return TypedTable(
        name, columns, rows(), notes, arrow_schema=schema, arrow_batches=batches, position=position
    )


def read_parquet(path: Path, meter: Meter, name: str) -> TypedTable:
    """The table in a Parquet file.

    INT96 timestamps (Impala, Spark) are read in microseconds: in nanoseconds, pyarrow's default,
    dates past 2262 silently wrap around to other years.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(path, coerce_int96_timestamp_unit="us")
        schema = handle.schema_arrow
        total = max(1, int(handle.metadata.num_rows))
        handle.close()
    except (pa.ArrowException, OSError) as exc:
        raise ImportFailed(f"{path.name} is not a readable Parquet file: {exc}") from exc
    size = path.stat().st_size
    done = [0]

    def batches() -> Iterator[Any]:
        done[0] = 0
        try:
            reading = pq.ParquetFile(path, coerce_int96_timestamp_unit="us")
            try:
                for batch in reading.iter_batches(batch_size=BATCH_ROWS):
                    done[0] += batch.num_rows
                    yield batch
            finally:
                reading.close()
        except (pa.ArrowException, OSError) as exc:
            raise ImportFailed(f"{path.name} is not a readable Parquet file: {exc}") from exc

    def position() -> int:
        """The share of the file read, counted in rows (Parquet is read by row groups)."""
        return size * done[0] // total

    table = arrow_table(name, schema, batches, meter, position)
    table.rows_hint = total
    return table


@contextmanager
def open_duckdb(path: Path, meter: Meter, display: str) -> Iterator[list[TypedTable]]:
    """Every table of a DuckDB database, and every view that still runs, as tables (read while
    the ``with`` block lasts).

    The file (with its ``.wal``) is copied into a temporary folder under the same name and read
    there: a DuckDB open may replay and checkpoint the WAL, which writes to the database file, and
    the source is never to change; the name stays because views name their own catalog after it.

    The file reads only itself (:data:`DUCKDB_CONFIG`): a view that reads another file, a glob, a
    folder's listing or ``/proc`` (``read_text('/etc/hostname')``, ``read_blob('/proc/self/
    environ')``) fails there and is skipped with a note, so no byte of anything but the file and its
    WAL reaches the cache, and the cache key (their size, time and hash) covers all that was read.
    Extensions are never loaded or installed: offline means offline.
    """
    import duckdb

    folder = Path(tempfile.mkdtemp(prefix="sqale-duckdb-"))
    try:
        copy = folder / path.name
        shutil.copyfile(path, copy)
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            shutil.copyfile(wal, folder / wal.name)
        config: dict[str, str | bool | int | float | list[str]] = dict(DUCKDB_CONFIG)
        try:
            con = duckdb.connect(str(copy), read_only=True, config=config)
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0]
            raise ImportFailed(f"{display} cannot be read by DuckDB {duckdb.__version__}: {first}") from exc
        try:
            yield _duckdb_tables(con, meter, display)
        finally:
            con.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _duckdb_tables(con: Any, meter: Meter, display: str) -> list[TypedTable]:
    import duckdb

    objects = con.execute(
        "SELECT schema_name, table_name, 'table', estimated_size FROM duckdb_tables() "
        "WHERE NOT internal AND NOT temporary "
        "UNION ALL SELECT schema_name, view_name, 'view', NULL FROM duckdb_views() WHERE NOT internal "
        "AND NOT temporary ORDER BY 3, 1, 2"
    ).fetchall()
    constraints = _duckdb_constraints(con)
    out: list[TypedTable] = []
    skipped: list[str] = []
    for schema, name, kind, estimated_rows in objects:
        label = name if schema == "main" else f"{schema}.{name}"
        sql = f'SELECT * FROM "{schema}"."{name}"'
        try:
            schema_arrow = con.sql(sql + " LIMIT 0").to_arrow_table().schema
        except duckdb.Error as exc:
            skipped.append(f"view {label} not imported: it fails in DuckDB ({str(exc).splitlines()[0]})")
            continue
        table = arrow_table(
            label, schema_arrow, _duckdb_reader(con, sql, f"{display} ⟶ {label}"), meter, lambda: 0
        )
        table.rows_hint = estimated_rows
        if kind == "view":
            table.notes.append(f"{label} is a DuckDB view, imported as a table of its rows")
        keys = constraints.get((schema, name))
        if keys:
            table.primary_key, table.unique, table.foreign_keys = keys
        out.append(table)
    if not out:
        raise ImportFailed(f"{display} holds no table to import.")
    out[0].notes.extend(skipped)
    return out


def _duckdb_reader(con: Any, sql: str, label: str) -> Callable[[], Iterator[Any]]:
    """The table's batches, read by running its query again at each call: when the builder gets to
    the table (one DuckDB result is open at a time).  A failure while the rows are read (a view
    that reaches outside the file only past its first rows) is a message naming the object."""
    import duckdb
    import pyarrow as pa

    def batches() -> Iterator[Any]:
        try:
            yield from con.sql(sql).to_arrow_reader(BATCH_ROWS)
        except (duckdb.Error, pa.ArrowException) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ImportFailed(f"{label} could not be read by DuckDB: {first}") from exc

    return batches


def _duckdb_constraints(con: Any) -> dict[tuple[str, str], tuple[list[str], list[list[str]], list[Any]]]:
    rows = con.execute(
        "SELECT schema_name, table_name, constraint_type, constraint_column_names, referenced_table, "
        "referenced_column_names FROM duckdb_constraints() "
        "WHERE constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'FOREIGN KEY')"
    ).fetchall()
    out: dict[tuple[str, str], tuple[list[str], list[list[str]], list[Any]]] = {}
    for schema, table, kind, cols, ref_table, ref_cols in rows:
        entry = out.setdefault((schema, table), ([], [], []))
        if kind == "PRIMARY KEY":
            entry[0].extend(cols)
        elif kind == "UNIQUE":
            entry[1].append(list(cols))
        elif ref_table:
            entry[2].append((list(cols), ref_table, list(ref_cols)))
    return out
