"""Writes the imported tables into a new SQLite file, fast and never half-way visible.

Every table is first streamed into a staging database beside the new file (cells as they came,
untyped, ``executemany`` in one transaction per table, journal and sync off: the file is thrown
away if anything fails, so SQLite's crash safety buys nothing here).  The types are decided while
the rows stream (:mod:`.types`); then the final table is created with its declared types, the
original names in comments, and the foreign keys the data shows (:mod:`.foreign_keys`), and filled
by one ``INSERT … SELECT`` that converts in SQLite's C code.  The caller renames the finished file
into the cache; the staging file is deleted.

Why not ``sqlite-utils`` (its ``insert_all`` with type detection is what Datasette's tools use): it
detects and converts each cell in Python and adds foreign keys by rewriting the schema afterwards;
this path converts in SQLite and declares the keys in the CREATE statement, several times faster on
a large CSV, with the same rules for what a column is.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqale_desktop.core.imports import names
from sqale_desktop.core.imports.progress import (
    ImportFailed,
    limit_not_disk,
    printable,
    write_limit_error,
)
from sqale_desktop.core.imports.text import TextTable
from sqale_desktop.core.imports.typed import TypedTable
from sqale_desktop.core.imports.types import ColumnGuess, TextCells, convert_sql, date_notes, error_notes

ROWS_PER_INSERT = 200  # rows per INSERT statement: measured fastest between 50 and 1,000
MAX_COLUMNS = 2000  # SQLite's default SQLITE_MAX_COLUMN, which Python's sqlite3 is built with


@dataclass
class Column:
    name: str
    original: str
    type: str
    expression: str  # the SQL that reads it from the staged table


@dataclass
class StagedTable:
    """A table in the staging database, its types decided, not yet in the final file."""

    name: str
    source: str
    stage: str
    columns: list[Column]
    rows: int
    notes: list[str] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    unique: list[list[str]] = field(default_factory=list)
    # (column, referenced table, referenced column, why)
    foreign_keys: list[tuple[str, str, str, str]] = field(default_factory=list)
    # Already the final table of the new file (the fast CSV path wrote it there): nothing to copy.
    in_place: bool = False

    @property
    def rows_from(self) -> str:
        """Where its rows are, for a ``FROM``: the staged table, or ``stage`` itself when in place."""
        return self.stage if self.in_place else f"stage.{self.stage}"


def open_build(path: Path, write_bytes: int) -> sqlite3.Connection:
    """The connection that writes the new file ``path``, with the staging database attached;
    neither file may grow past ``write_bytes``."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA cache_size=-65536")
    conn.execute("ATTACH DATABASE ? AS stage", (str(path) + ".stage",))
    conn.execute("PRAGMA stage.journal_mode=OFF")
    conn.execute("PRAGMA stage.synchronous=OFF")
    conn.execute("PRAGMA stage.cache_size=-65536")
    for schema in ("main", "stage"):
        page = conn.execute(f"PRAGMA {schema}.page_size").fetchone()[0]
        conn.execute(f"PRAGMA {schema}.max_page_count={max(1, write_bytes // page)}")
    return conn


def limit_reached(
    conn: sqlite3.Connection, exc: BaseException, source: str, limit: int
) -> ImportFailed | None:
    """The size limit's message when ``exc`` is SQLite's "full" because a file of ``conn`` reached
    its ``max_page_count`` (:func:`open_build` at ``limit``); None for anything else (a full disk
    among them)."""
    if not (isinstance(exc, sqlite3.OperationalError) and "full" in str(exc)):
        return None
    try:
        where = Path(conn.execute("PRAGMA database_list").fetchone()[2]).parent
        for schema in ("main", "stage"):
            page = conn.execute(f"PRAGMA {schema}.page_size").fetchone()[0]
            if conn.execute(f"PRAGMA {schema}.max_page_count").fetchone()[0] * page < limit - page:
                return None  # a smaller bound than ours (a disk quota, a test's): the disk's message
    except (sqlite3.Error, TypeError):
        return None
    return write_limit_error(source, limit) if limit_not_disk(where) else None


def disk_error(exc: BaseException, where: Path) -> ImportFailed | None:
    """The message for a full disk (SQLite's SQLITE_FULL or the OS's ENOSPC), else None."""
    full = (isinstance(exc, sqlite3.OperationalError) and "full" in str(exc)) or (
        isinstance(exc, OSError) and exc.errno == errno.ENOSPC
    )
    if full:
        return ImportFailed(
            f"The disk holding the import cache ({where}) is full; free some space and open the file again. "
            "Nothing was kept of this import."
        )
    return None


class Builder:
    """Stages tables, then writes them into the final file (see the module's docstring)."""

    def __init__(self, conn: sqlite3.Connection, write_bytes: int) -> None:
        self.conn = conn
        self.write_bytes = write_bytes  # the limit :func:`open_build` set on ``conn``'s files
        self.taken: set[str] = set()
        self.staged: list[StagedTable] = []
        # How many ``?`` one statement may hold (32,766 since SQLite 3.32, 999 before).
        self._variables = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)

    def _stage_name(self) -> str:
        return f"t{len(self.staged)}"

    def stage_text(self, table: TextTable, source: str) -> StagedTable:
        """Stream ``table`` into the staging database, deciding its column types on the way."""
        source = printable(source)
        stage = self._stage_name()
        # Created at the first batch: a JSON file's keys are known only once its rows are read.
        width = 0
        guesses: list[ColumnGuess] = []
        created = False
        rows = short = 0
        self.conn.execute("BEGIN")
        try:
            for batch in table.batches:
                longest = max(map(len, batch), default=0)
                if longest > len(table.headers):
                    table.headers.extend("" for _ in range(longest - len(table.headers)))
                if not created or len(table.headers) > width:
                    width = self._widen(stage, created, width, len(table.headers), table.name)
                    guesses += [ColumnGuess(table.decimal_comma) for _ in range(width - len(guesses))]
                    created = True
                if min(map(len, batch), default=width) < width:
                    for row in batch:
                        if len(row) < width:
                            short += 1
                            row.extend(None for _ in range(width - len(row)))
                if table.formula_errors:
                    # Counted in every column (a text column's note names them too), guessed without.
                    for guess, cells in zip(guesses, zip(*batch, strict=True), strict=False):
                        column = TextCells(cells, guess.errors)
                        if guess.candidates:
                            guess.update(column)
                elif any(guess.candidates for guess in guesses):
                    # Every row now has ``width`` cells: zip(*batch) turns the rows into columns in C.
                    for guess, cells in zip(guesses, zip(*batch, strict=True), strict=False):
                        if guess.candidates:
                            guess.update(TextCells(cells))
                self._insert(stage, width, batch)
                rows += len(batch)
            if not created or len(table.headers) > width:
                width = self._widen(stage, created, width, len(table.headers), table.name)
                guesses += [ColumnGuess(table.decimal_comma) for _ in range(width - len(guesses))]
            self.conn.execute("COMMIT")
        except BaseException as exc:
            capped = limit_reached(self.conn, exc, source, self.write_bytes)
            self._abandon(stage)
            # A refused table's batches are left part-read: closed now, so its file is closed now
            # (not by the garbage collector, in whatever order a reference cycle is freed).
            close = getattr(table.batches, "close", None)
            if close is not None:
                close()
            if capped is not None:
                raise capped from exc
            raise
        if width == 0:
            raise ImportFailed(f"{source} has no columns to import.")
        column_names = names.unique_columns(table.headers)
        columns = []
        for i, (name, raw, guess) in enumerate(zip(column_names, table.headers, guesses, strict=True)):
            kind = guess.result()
            sql = convert_sql(f"c{i}", kind, guess.comma_seen, guess.date_layout, guess.errors)
            columns.append(Column(name, raw, kind, sql))
        notes = list(table.notes) + date_notes(column_names, guesses) + error_notes(column_names, guesses)
        if short:
            notes.append(f"{short:,} row(s) had fewer fields than the header: the missing cells are NULL")
        if rows == 0:
            notes.append("the file has a header but no rows")
        staged = StagedTable(
            names.unique_table(printable(table.name), self.taken), source, stage, columns, rows, notes
        )
        self.staged.append(staged)
        return staged

    def stage_typed(self, table: TypedTable, source: str) -> StagedTable:
        """Stream ``table`` (types known) into the staging database."""
        source = printable(source)
        stage = self._stage_name()
        width = len(table.columns)
        self._check_width(width, table.name)
        if width == 0:
            raise ImportFailed(f"{source} has no columns to import.")
        cols = ", ".join(f"c{i}" for i in range(width))
        self.conn.execute(f"CREATE TABLE stage.{stage} ({cols})")
        rows = 0
        self.conn.execute("BEGIN")
        try:
            for batch in table.batches:
                self._insert(stage, width, batch)
                rows += len(batch)
            self.conn.execute("COMMIT")
        except BaseException as exc:
            capped = limit_reached(self.conn, exc, source, self.write_bytes)
            self._abandon(stage)
            if capped is not None:
                raise capped from exc
            raise
        staged = typed_staged(
            table, names.unique_table(printable(table.name), self.taken), source, stage, rows
        )
        for i, column in enumerate(staged.columns):
            column.expression = f"c{i}"
        self.staged.append(staged)
        return staged

    def adopt(self, staged: StagedTable, written: Path | None, raw_name: str) -> StagedTable:
        """Take a table the fast CSV path wrote: in place in the new file (``written`` None; its name
        is already final), or in a file of its own, ``written``, whose table is copied into the
        staging database (in C) and the file deleted; its columns' expressions then read the copy,
        and it is named after ``raw_name`` like any staged table."""
        if written is None:
            self.taken.add(staged.name.casefold())
            staged.in_place = True
        else:
            staged.name = names.unique_table(printable(raw_name), self.taken)
            stage = self._stage_name()
            self.conn.execute("ATTACH DATABASE ? AS fast", (str(written),))
            try:
                written_table = staged.stage.replace("main.", "fast.", 1)
                self.conn.execute(f"CREATE TABLE stage.{stage} AS SELECT * FROM {written_table}")
            except sqlite3.OperationalError as exc:
                capped = limit_reached(self.conn, exc, staged.source, self.write_bytes)
                if capped is not None:
                    raise capped from exc
                raise
            finally:
                self.conn.execute("DETACH DATABASE fast")
                with contextlib.suppress(FileNotFoundError):
                    written.unlink()
            staged.stage = stage
        self.staged.append(staged)
        return staged

    def _insert(self, stage: str, width: int, batch: Sequence[Sequence[Any]]) -> None:
        """Append ``batch`` (rows of exactly ``width`` cells) to the staged table.

        One row per statement costs SQLite a statement step and Python a bind loop per row, most of
        an import's time; a multi-row ``VALUES`` of up to :data:`ROWS_PER_INSERT` rows, fed from the
        flattened cells by ``zip`` (in C), took 30% less CPU on the benchmark's CSV (1.04 s instead
        of 1.49 s for 560,000 rows of 7 cells).  Flattening would shift every later cell if one row
        were shorter, so the widths are checked first (in C).
        """
        if not batch or not width:
            return  # rows of no cells (JSON ``{}``): the table is refused for its lack of columns
        if min(map(len, batch)) != width or max(map(len, batch)) != width:
            raise RuntimeError(f"rows of {stage} do not all have {width} cells")
        one = "(" + ", ".join("?" * width) + ")"
        per = max(1, min(ROWS_PER_INSERT, self._variables // width))
        whole = len(batch) // per * per
        if per > 1 and whole:
            cells = itertools.chain.from_iterable(itertools.islice(batch, whole))
            many = ", ".join([one] * per)
            groups = zip(*[cells] * (width * per), strict=True)
            self.conn.executemany(f"INSERT INTO stage.{stage} VALUES {many}", groups)
        else:
            whole = 0
        if whole < len(batch):
            self.conn.executemany(f"INSERT INTO stage.{stage} VALUES {one}", batch[whole:])

    def _abandon(self, stage: str | None) -> None:
        """Undo what a failed step wrote (SQLite has already rolled back after SQLITE_FULL)."""
        with contextlib.suppress(sqlite3.Error):
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            if stage is not None:
                self.conn.execute(f"DROP TABLE IF EXISTS stage.{stage}")

    def _widen(self, stage: str, created: bool, width: int, wanted: int, name: str) -> int:
        """Create the staged table with ``wanted`` columns, or add the ones it lacks."""
        self._check_width(wanted, name)
        if not created:
            self.conn.execute(
                f"CREATE TABLE stage.{stage} ({', '.join(f'c{i}' for i in range(max(1, wanted)))})"
            )
            return max(wanted, 0)
        for i in range(width, wanted):
            self.conn.execute(f"ALTER TABLE stage.{stage} ADD COLUMN c{i}")
        return wanted

    def _check_width(self, width: int, name: str) -> None:
        if width > MAX_COLUMNS:
            raise ImportFailed(
                f"{name} has {width:,} columns; a SQLite table holds at most {MAX_COLUMNS:,}. "
                "Split the file into narrower ones (or transpose it) and open those."
            )

    def finish(self) -> None:
        """Create and fill the final tables and the ``_columns`` note; empty the staging file."""
        self.conn.execute("BEGIN")
        try:
            self.conn.execute(
                "CREATE TABLE _columns (\n  table_name TEXT,\n  column_name TEXT,\n  original_name TEXT,\n"
                "  position INTEGER,\n  type TEXT\n) -- the names and types each imported column had in "
                "its source"
            )
            for table in self.staged:
                if not table.in_place:
                    self.conn.execute(create_sql(table))
                    select = ", ".join(c.expression for c in table.columns)
                    self.conn.execute(
                        f"INSERT INTO main.{names.quote(table.name)} SELECT {select} FROM {table.rows_from}"
                    )
                    self.conn.execute(f"DROP TABLE {table.rows_from}")
                self.conn.executemany(
                    "INSERT INTO _columns VALUES (?, ?, ?, ?, ?)",
                    [(table.name, c.name, c.original, i, c.type) for i, c in enumerate(table.columns, 1)],
                )
            self.conn.execute("COMMIT")
        except BaseException as exc:
            capped = limit_reached(self.conn, exc, "The imported file", self.write_bytes)
            self._abandon(None)
            if capped is not None:
                raise capped from exc
            raise

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return list(self.conn.execute(sql, params))


def typed_staged(table: TypedTable, name: str, source: str, stage: str, rows: int) -> StagedTable:
    """The description of a table whose types its source declared: its columns (named as SQLite
    needs, each read by its quoted name), its keys with those names, and its notes."""
    column_names = names.unique_columns([c[0] for c in table.columns])
    renamed = dict(zip((c[0] for c in table.columns), column_names, strict=True))
    columns = [
        Column(column, raw, kind, names.quote(column))
        for column, (raw, kind) in zip(column_names, table.columns, strict=True)
    ]
    staged = StagedTable(
        name,
        source,
        stage,
        columns,
        rows,
        list(table.notes),
        primary_key=[renamed.get(c, c) for c in table.primary_key],
        unique=[[renamed.get(c, c) for c in u] for u in table.unique],
    )
    for cols, ref_table, ref_cols in table.foreign_keys:
        if len(cols) == 1 and len(ref_cols) == 1:
            why = "declared in the source database"
            staged.foreign_keys.append((renamed.get(cols[0], cols[0]), ref_table, ref_cols[0], why))
    return staged


def create_sql(table: StagedTable) -> str:
    """The CREATE TABLE statement, with each renamed column's original name in a comment (SQLite
    keeps comments in the stored schema, so ``describe_table`` shows them)."""
    lines: list[str] = []
    single_pk = table.primary_key[0] if len(table.primary_key) == 1 else None
    uniques = {u[0] for u in table.unique if len(u) == 1}
    for column in table.columns:
        line = f"  {names.quote(column.name)} {column.type}"
        if column.name == single_pk:
            line += " PRIMARY KEY"
        elif column.name in uniques:
            line += " UNIQUE"
        lines.append(line)
    if len(table.primary_key) > 1:
        lines.append(f"  PRIMARY KEY ({', '.join(names.quote(c) for c in table.primary_key)})")
    for u in table.unique:
        if len(u) > 1:
            lines.append(f"  UNIQUE ({', '.join(names.quote(c) for c in u)})")
    for child, ref_table, ref_column, _why in table.foreign_keys:
        lines.append(
            f"  FOREIGN KEY ({names.quote(child)}) "
            f"REFERENCES {names.quote(ref_table)} ({names.quote(ref_column)})"
        )
    comments = {c.name: c for c in table.columns}
    out = [f"CREATE TABLE {names.quote(table.name)} ( -- from {names.comment(table.source)}"]
    for index, line in enumerate(lines):
        text = line + ("," if index < len(lines) - 1 else "")
        name = _column_of(line)
        renamed = comments.get(name) if name is not None else None
        if renamed is not None and renamed.original != renamed.name:
            text += f" -- original name: {names.comment(repr(renamed.original))}"
        out.append(text)
    out.append(")")
    return "\n".join(out)


def _column_of(line: str) -> str | None:
    stripped = line.strip()
    if not stripped.startswith('"'):
        return None
    end = 1
    while True:
        end = stripped.index('"', end)
        if stripped[end : end + 2] == '""':
            end += 2
            continue
        return stripped[1:end].replace('""', '"')
