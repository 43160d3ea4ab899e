"""Parquet files and DuckDB tables written by the ADBC driver, their columns converted by Arrow.

The general path (:mod:`.typed` into :class:`.builder.Builder`) turns each cell into a Python
value; here each column is converted as a whole, to what SQLite stores, by the same rules as
:func:`.typed._plan` (that function still decides the declared type and the note): integers and
booleans int64, floats float64, dates, times and timestamps ISO-8601 text (the same Arrow casts and
``strftime``), decimals of scale 0 int64 and of up to 15 digits float64 (through their exact text,
as ``float(Decimal)`` rounds), strings as they are.  A column whose values Arrow cannot convert as
a whole (nested values to JSON, wide decimals, other types) is converted in Python into one text
column, as the general path does it.  A column that would hold two storage classes (an unsigned
64-bit value past SQLite's integers, binary data that is not UTF-8) cannot be one Arrow array:
:class:`.fast_text.NotFast` sends the table to the general path, before anything is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sqale_desktop.core.imports import arrow_writer, names
from sqale_desktop.core.imports.builder import MAX_COLUMNS, StagedTable, typed_staged
from sqale_desktop.core.imports.fast_text import NotFast
from sqale_desktop.core.imports.limits import ImportLimits
from sqale_desktop.core.imports.progress import Meter
from sqale_desktop.core.imports.typed import TypedTable, _plan

_INT64_MAX = 2**63 - 1

Converter = Callable[[Any], Any]


def wanted(table: TypedTable, limits: ImportLimits) -> bool:
    """Whether ``table`` can and should take this path: an Arrow source that says it holds at
    least ``fast_typed_rows`` rows (fewer import in well under a second by the general path; a
    DuckDB view, which cannot say, takes it too)."""
    if table.arrow_schema is None or table.arrow_batches is None:
        return False
    if not 0 < len(table.columns) <= MAX_COLUMNS:
        return False
    return table.rows_hint is not None and table.rows_hint >= limits.fast_typed_rows


def write_table(
    table: TypedTable,
    target: Path,
    table_name: str,
    source: str,
    meter: Meter,
    constraints: bool,
    write_bytes: int,
) -> StagedTable:
    """Write ``table`` as ``table_name`` into the new file ``target`` (at most ``write_bytes``);
    its description, whose ``stage`` is the table's quoted name there.  ``constraints`` False: the
    file holds the rows only (its keys are declared when the builder copies it into the final
    file).  Raises
    :class:`NotFast` (``target`` deleted, the meter rewound) for the general path."""
    import pyarrow as pa

    batches = table.arrow_batches
    assert batches is not None
    converters = [_converter(field.type) for field in table.arrow_schema]
    types = [kind for _convert, kind in converters]
    staged = typed_staged(table, table_name, source, f"main.{names.quote(table_name)}", 0)
    written = (
        staged if constraints else dataclasses.replace(staged, primary_key=[], unique=[], foreign_keys=[])
    )

    def converted() -> Iterator[tuple[list[Any], int, int]]:
        for batch in batches():
            columns = [convert(batch.column(i)) for i, (convert, _kind) in enumerate(converters)]
            yield columns, batch.num_rows, table.position()

    try:
        staged.rows = arrow_writer.write(converted(), types, target, written, meter, source, write_bytes)
    except BaseException as exc:
        if isinstance(exc, NotFast | pa.ArrowInvalid):
            meter.rewind()
        target.unlink(missing_ok=True)
        if isinstance(exc, pa.ArrowInvalid):
            raise NotFast(f"a column Arrow cannot convert as a whole: {exc}") from exc
        raise
    return staged


def _converter(arrow_type: Any) -> tuple[Converter, Any]:
    """(a function from an Arrow array to the array SQLite stores, that array's type)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as t

    if t.is_dictionary(arrow_type):
        inner, kind = _converter(arrow_type.value_type)
        return (lambda a: inner(a.dictionary_decode())), kind
    if t.is_boolean(arrow_type) or (t.is_integer(arrow_type) and not _is_uint64(arrow_type)):
        return (lambda a: a.cast(pa.int64())), pa.int64()
    if _is_uint64(arrow_type):
        return _uint64, pa.int64()
    if t.is_floating(arrow_type):
        return (lambda a: a.cast(pa.float64())), pa.float64()
    if t.is_string(arrow_type) or t.is_large_string(arrow_type):
        return (lambda a: a.cast(pa.string())), pa.string()
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type) or t.is_fixed_size_binary(arrow_type):
        return _utf8_or_not_fast, pa.string()
    if t.is_date(arrow_type) or t.is_time(arrow_type):
        return (lambda a: a.cast(pa.string())), pa.string()
    if t.is_timestamp(arrow_type):
        return (lambda a: pc.strftime(a, format="%Y-%m-%d %H:%M:%S")), pa.string()
    if t.is_decimal(arrow_type) and arrow_type.scale == 0 and arrow_type.precision <= 18:
        return (lambda a: a.cast(pa.int64())), pa.int64()
    if t.is_decimal(arrow_type) and arrow_type.precision <= 15:
        return (lambda a: a.cast(pa.string()).cast(pa.float64())), pa.float64()
    if t.is_null(arrow_type):
        return (lambda a: pa.nulls(len(a), pa.string())), pa.string()
    # Nested values (JSON text), wide decimals (exact text) and any other type: the general path's
    # own conversion, in Python, always to text.
    python = _plan(arrow_type)[1]
    return (lambda a: pa.array(python(a), pa.string())), pa.string()


def _is_uint64(arrow_type: Any) -> bool:
    import pyarrow.types as t

    return bool(t.is_unsigned_integer(arrow_type) and arrow_type.bit_width == 64)


def _uint64(array: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    largest = pc.max(array).as_py()
    if largest is not None and largest > _INT64_MAX:
        raise NotFast("an unsigned 64-bit value past SQLite's integers (kept as text there)")
    return array.cast(pa.int64())


def _utf8_or_not_fast(array: Any) -> Any:
    import pyarrow as pa

    try:
        return array.cast(pa.binary()).cast(pa.string())  # the cast checks that it is UTF-8
    except pa.ArrowInvalid as exc:
        raise NotFast("binary values that are not all UTF-8 (some stay BLOBs)") from exc
