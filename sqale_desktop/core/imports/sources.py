"""The kinds of data file an import reads, in one table: their suffixes, their reader, their fast
path and how the dialog and the summary name them.

:func:`kind_of` finds a file's :class:`Source` by its name (a DuckDB database named ``.db`` by its
magic); the build (:mod:`.assembly`) asks the table how to read a file and how to sum it up, the
open dialog and the preview ask it which files it names, so adding a kind is one row here.  The
readers are imported only when a file is read (in the importer child): the parent that finds a
file's kind loads none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqale_desktop.core.imports.limits import ImportLimits
from sqale_desktop.core.imports.progress import Meter

if TYPE_CHECKING:
    from sqale_desktop.core.imports.builder import Builder, StagedTable
    from sqale_desktop.core.imports.typed import TypedTable

log = logging.getLogger(__name__)

FOLDER = "folder"  # a folder of data files: one database of its files (:mod:`.folders`)


@dataclass(frozen=True)
class Step:
    """What reading one file into the build takes besides the file."""

    build: Builder
    meter: Meter
    limits: ImportLimits
    in_folder: bool  # one file of a folder (a single file has had its whole-file fast path tried)


@dataclass(frozen=True)
class Source:
    """One kind of data file.

    ``label`` names its files in the open dialog and in messages.  ``stage`` reads a file into the
    build; ``whole``, when the kind has one, is the fast path that writes a single file's one table
    straight into the new database (None: not worth it, or not possible; the file is then staged).
    ``part`` is what the summary calls its tables when they are not simply tables (a workbook's
    sheets), ``origin`` what they were in when that is worth saying; ``related``: its tables'
    foreign keys are inferred from their values, as a folder's are; ``magic`` recognises a file of
    the kind under another suffix."""

    kind: str
    label: str
    suffixes: tuple[str, ...]
    stage: Callable[[Path, Step], None]
    whole: Callable[[Path, Path, str, Meter, ImportLimits], StagedTable | None] | None = None
    gzip: bool = False
    preview: bool = False
    related: bool = False
    part: str = "table"
    origin: str = ""
    companions: tuple[str, ...] = ()  # files beside it that it reads too (a DuckDB ``.wal``)
    magic: Callable[[Path], bool] | None = None

    def summary(self, name: str, staged: list[StagedTable]) -> str:
        """The one line that says what the import of the file ``name`` made."""
        if self.part != "table":
            return f"{name} — {plural(len(staged), self.part)} imported as tables"
        if self.origin:
            return f"{name} — {plural(len(staged), 'table')} imported from {self.origin}"
        if len(staged) == 1:
            return f"{name} — imported as table {staged[0].name} ({plural(staged[0].rows, 'row')})"
        return f"{name} — imported as {plural(len(staged), 'table')}"


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def stem(path: Path) -> str:
    """The table name a file suggests: its name before the first dot (``sales.csv.gz``: sales)."""
    from sqale_desktop.core.imports.progress import printable

    return printable(path.name.split(".")[0] if path.name.split(".")[0] else path.stem)


def _scratch(build: Builder) -> Path:
    """The file a fast path writes one table of several into, beside the new database."""
    return Path(build.conn.execute("PRAGMA database_list").fetchone()[2]).with_suffix(".fast")


def fast_csv(
    path: Path, target: Path, table_name: str, meter: Meter, limits: ImportLimits
) -> StagedTable | None:
    """The table the fast CSV path (:mod:`.fast_text`) wrote into ``target``, or None when the file
    is small or the general path must import it (the reason is logged)."""
    from sqale_desktop.core.imports import fast_text

    if not fast_text.wanted(path, limits):
        return None
    try:
        return fast_text.write_table(path, target, table_name, path.name, meter, limits)
    except fast_text.NotFast as exc:
        log.info("%s: imported by the general text path (%s)", path.name, exc)
        return None


def fast_typed(
    table: TypedTable,
    target: Path,
    table_name: str,
    source: str,
    meter: Meter,
    limits: ImportLimits,
    own_file: bool = False,
) -> StagedTable | None:
    """The table the fast Arrow path (:mod:`.fast_typed`) wrote into ``target``, or None when it is
    small or the general path must import it (the reason is logged).  ``own_file``: the table is
    one of several, copied into the final file by the builder, which declares its keys there."""
    from sqale_desktop.core.imports import fast_text
    from sqale_desktop.core.imports import fast_typed as fast

    if not fast.wanted(table, limits):
        return None
    try:
        return fast.write_table(table, target, table_name, source, meter, not own_file, limits.write_bytes)
    except fast_text.NotFast as exc:
        log.info("%s: imported by the general path (%s)", source, exc)
        return None


def _stage_csv(path: Path, step: Step) -> None:
    from sqale_desktop.core.imports import text

    build = step.build
    if step.in_folder:
        scratch = _scratch(build)
        fast = fast_csv(path, scratch, "t", step.meter, step.limits)
        if fast is not None:
            build.adopt(fast, scratch, stem(path))
            return
    try:
        build.stage_text(text.read_csv(path, step.meter, stem(path), step.limits.batch_rows), path.name)
    except UnicodeDecodeError:
        table = text.read_csv(path, step.meter, stem(path), step.limits.batch_rows, encoding="latin-1")
        table.notes.append(text.MIXED_ENCODING_NOTE)
        step.build.stage_text(table, path.name)


def _stage_json(path: Path, step: Step) -> None:
    from sqale_desktop.core.imports import json_source

    for table in json_source.read_json(path, step.meter, stem(path), step.limits):
        step.build.stage_text(table, path.name)


def _stage_json_lines(path: Path, step: Step) -> None:
    from sqale_desktop.core.imports import json_source

    table = json_source.read_json_lines(path, step.meter, stem(path), step.limits)
    step.build.stage_text(table, path.name)


def _stage_workbook(path: Path, step: Step) -> None:
    from sqale_desktop.core.imports import excel

    prefix = stem(path) if step.in_folder else None
    for table in excel.read_workbook(path, step.meter, prefix, step.limits.batch_rows):
        step.build.stage_text(table, f"{path.name} ⟶ sheet {table.name}")


def _stage_parquet(path: Path, step: Step) -> None:
    from sqale_desktop.core.imports import typed

    parquet = typed.read_parquet(path, step.meter, stem(path))
    scratch = _scratch(step.build)
    fast = fast_typed(parquet, scratch, "t", path.name, step.meter, step.limits, own_file=True)
    if fast is not None:
        step.build.adopt(fast, scratch, stem(path))
    else:
        step.build.stage_typed(parquet, path.name)


def _whole_parquet(
    path: Path, target: Path, name: str, meter: Meter, limits: ImportLimits
) -> StagedTable | None:
    from sqale_desktop.core.imports import typed

    return fast_typed(typed.read_parquet(path, meter, name), target, name, path.name, meter, limits)


def _stage_duckdb(path: Path, step: Step) -> None:
    from sqale_desktop.core.imports import typed

    scratch = _scratch(step.build)
    with typed.open_duckdb(path, step.meter, path.name) as typed_tables:
        for typed_table in typed_tables:
            label = f"{path.name} ⟶ {typed_table.name}"
            fast = fast_typed(typed_table, scratch, "t", label, step.meter, step.limits, own_file=True)
            if fast is not None:
                step.build.adopt(fast, scratch, typed_table.name)
            else:
                step.build.stage_typed(typed_table, label)


def _is_duckdb(path: Path) -> bool:
    """A DuckDB database under another name (``.db``): its magic is at offset 8."""
    if not path.is_file():
        return False  # never open a FIFO or a device to sniff it: the open blocks
    try:
        with open(path, "rb") as handle:
            return handle.read(12)[8:12] == b"DUCK"
    except OSError:
        return False


SOURCES: tuple[Source, ...] = (
    Source(
        "csv", "CSV, TSV", (".csv", ".tsv", ".tab", ".txt"), _stage_csv, fast_csv, gzip=True, preview=True
    ),
    Source("json", "JSON", (".json",), _stage_json, gzip=True),
    Source("jsonl", "JSON Lines", (".jsonl", ".ndjson"), _stage_json_lines, gzip=True),
    Source("excel", "Excel", (".xlsx", ".xlsm", ".ods"), _stage_workbook, related=True, part="sheet"),
    Source("parquet", "Parquet", (".parquet",), _stage_parquet, _whole_parquet),
    Source(
        "duckdb",
        "DuckDB",
        (".duckdb",),
        _stage_duckdb,
        origin="DuckDB",
        companions=(".wal",),
        magic=_is_duckdb,
    ),
)
BY_KIND = {source.kind: source for source in SOURCES}
_BY_SUFFIX = {suffix: source for source in SOURCES for suffix in source.suffixes}

# The file dialog's filter (Qt's "Name (*.a *.b)" patterns) and what it calls those files.
DIALOG_PATTERNS = " ".join(
    [f"*{s}" for source in SOURCES for s in source.suffixes]
    + [f"*{s}.gz" for source in SOURCES if source.gzip for s in source.suffixes]
)
DIALOG_LABEL = ", ".join(source.label for source in SOURCES)


def source_of(path: Path) -> Source | None:
    """The kind of data file ``path`` is, or None for a SQLite database, a folder, or a file of no
    known kind."""
    if path.exists() and not path.is_file():
        return None  # a folder, a FIFO or a device: reading it could block
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if not suffixes:
        return None
    if suffixes[-1] == ".gz":
        source = _BY_SUFFIX.get(suffixes[0]) if len(suffixes) == 2 else None
        return source if source is not None and source.gzip else None
    source = _BY_SUFFIX.get(suffixes[-1])
    if source is not None:
        return source
    return next((s for s in SOURCES if s.magic is not None and s.magic(path)), None)


def previewable(path: Path) -> bool:
    """Whether ``path`` is a kind of file whose first rows are shown while it imports (:mod:`.preview`)."""
    source = source_of(path)
    return source is not None and source.preview


def kind_of(path: Path) -> str | None:
    """What ``path`` is to import as (a :class:`Source`'s kind, or ``folder``), or None for a
    SQLite database or a file of no known kind."""
    if path.is_dir():
        return FOLDER
    source = source_of(path)
    return source.kind if source is not None else None


def folder_refusal(name: str) -> str:
    """The message for a folder that holds no data file."""
    labels = [source.label for source in SOURCES]
    return f"The folder {name} holds no {', '.join(labels[:-1])} or {labels[-1]} file."
