"""The build of one import, in the importer child (:mod:`.isolated`): every reader of the source,
the fast paths and the SQLite writer, into the cache folder's ``.building``.

Which reader reads a file, and how its tables are summed up, is the table of sources'
(:mod:`.sources`); this module runs the steps every kind shares: the meter, a folder's files one by
one (a bad one skipped with a note), the keys, the final write, and a failure turned into a
message that names the file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import threading
from pathlib import Path

from sqale_desktop.core.imports import builder as builder_mod
from sqale_desktop.core.imports import cache_bound, names
from sqale_desktop.core.imports.plan import ImportPlan
from sqale_desktop.core.imports.progress import ImportCancelled, ImportFailed, Meter, ProgressFn, printable
from sqale_desktop.core.imports.result import ImportResult, TableSummary
from sqale_desktop.core.imports.sources import BY_KIND, FOLDER, Step, plural, source_of, stem


def build(plan: ImportPlan, progress: ProgressFn | None, cancel: threading.Event | None) -> ImportResult:
    """Carry out ``plan``: its source's tables, written into its folder's ``.building``."""
    from sqale_desktop.core.imports import foreign_keys

    source, kind, folder, limits = plan.source, plan.kind, plan.folder, plan.limits
    building = folder / cache_bound.BUILDING
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True, exist_ok=True)
    target = building / plan.db_path.name
    meter = Meter(sum(p.stat().st_size for p in plan.members), progress, cancel)
    conn: sqlite3.Connection | None = None
    notes = list(plan.skipped)
    files = plan.members if kind == FOLDER else (source,)
    alone = None if kind == FOLDER else BY_KIND[kind]
    try:
        written = None
        if alone is not None and alone.whole is not None:
            # One file: the fast path writes the final file itself, before sqlite3 opens it.
            meter.start_file(source.name)
            written = alone.whole(source, target, names.unique_table(stem(source), set()), meter, limits)
        conn = builder_mod.open_build(target, limits.write_bytes)
        build = builder_mod.Builder(conn, limits.write_bytes)
        if written is not None:
            build.adopt(written, None, "")
        else:
            for member in files:
                _add_file(Step(build, meter, limits, in_folder=alone is None), member, notes)
        if alone is None and not build.staged:
            raise ImportFailed(f"No file of the folder {source.name} could be imported: " + "; ".join(notes))
        meter.finish()
        if alone is None or alone.related:
            foreign_keys.infer(build)
        _resolve_declared_keys(build)
        meter.check()
        build.finish()
    except BaseException as exc:
        if conn is not None:
            conn.close()
        shutil.rmtree(building, ignore_errors=True)
        if isinstance(exc, ImportFailed | KeyboardInterrupt):
            raise
        full = builder_mod.disk_error(exc, folder)
        if full is not None:
            raise full from exc
        if isinstance(exc, FileNotFoundError):
            raise ImportFailed(
                f"{source.name} disappeared while it was being imported; nothing was kept."
            ) from exc
        if isinstance(exc, sqlite3.Error | OSError):
            raise ImportFailed(f"{source.name} could not be imported: {exc}") from exc
        raise
    conn.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(str(target) + ".stage")
    tables = [TableSummary(t.name, t.source, t.rows, len(t.columns)) for t in build.staged]
    for t in build.staged:
        notes += [f"{t.name}: {n}" for n in t.notes]
    fks = [f"{t.name}.{c} → {rt}.{rc}: {why}" for t in build.staged for c, rt, rc, why in t.foreign_keys]
    if alone is None:
        summary = (
            f"{source.name}/ — {plural(len(files), 'file')} imported as {plural(len(build.staged), 'table')}"
        )
    else:
        summary = alone.summary(source.name, build.staged)
    return ImportResult(plan.db_path, source, printable(summary), tables, notes, fks)


def _add_file(step: Step, path: Path, notes: list[str]) -> None:
    """Stage ``path``'s tables; a file of a folder that is refused is skipped with a note."""
    step.meter.start_file(path.name)
    source = source_of(path)
    if source is None:
        notes.append(f"{path.name} not imported: not a supported kind of file")
        return
    if not step.in_folder:
        source.stage(path, step)
        return
    try:  # one bad file of a folder is skipped with a note; the others are imported
        source.stage(path, step)
    except ImportCancelled:
        raise
    except ImportFailed as exc:
        step.meter.rewind()
        notes.append(f"{printable(path.name)} skipped: {exc}")


def _resolve_declared_keys(build: builder_mod.Builder) -> None:
    """Keys a DuckDB file declared name its own tables: point them at the imported names."""
    by_label = {t.source.split(" ⟶ ")[-1]: t.name for t in build.staged}
    staged = {t.name for t in build.staged}
    for table in build.staged:
        kept = []
        for column, ref_table, ref_column, why in table.foreign_keys:
            target = ref_table if ref_table in staged else by_label.get(ref_table)
            if target is not None:
                kept.append((column, target, ref_column, why))
        table.foreign_keys = kept
