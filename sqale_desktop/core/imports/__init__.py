"""Data files people have (CSV, TSV, JSON, Excel, Parquet, DuckDB, a folder of them) as SQLite.

Datasette's way: the file is turned into a SQLite database, and everything the app does with a
database (the read-only guard, the tools, the grid, the agent, history, evaluation) works on it
unchanged.  The database lives in the app's cache, never next to the source, one per source
(:mod:`.cache`: reused while the source is unchanged, built again with a note when it changed,
renamed into place only when complete); the source is only ever read.  The build itself (every
reader of the file, :mod:`.assembly`, each kind's from the table in :mod:`.sources`) runs in a
child process under the memory cap, killed on Stop (:mod:`.isolated`).

:func:`resolve_database` is what every open path calls: a SQLite file comes back as it is, any
other supported source comes back as the path of its imported database.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from sqale_desktop.core.imports import build_lock, cache, cache_bound, isolated
from sqale_desktop.core.imports.cache import cache_folder
from sqale_desktop.core.imports.isolated import ImportCrashed
from sqale_desktop.core.imports.limits import ImportLimits
from sqale_desktop.core.imports.plan import ImportPlan
from sqale_desktop.core.imports.progress import (
    ImportCancelled,
    ImportFailed,
    ImportProgress,
    ProgressFn,
    printable,
)
from sqale_desktop.core.imports.result import ImportResult, TableSummary
from sqale_desktop.core.imports.sources import (
    BY_KIND,
    DIALOG_LABEL,
    DIALOG_PATTERNS,
    FOLDER,
    folder_refusal,
    kind_of,
    previewable,
)

__all__ = [
    "DIALOG_LABEL",
    "DIALOG_PATTERNS",
    "ImportCancelled",
    "ImportCrashed",
    "ImportFailed",
    "ImportLimits",
    "ImportProgress",
    "ImportResult",
    "TableSummary",
    "cache_folder",
    "import_source",
    "kind_of",
    "previewable",
    "resolve_database",
]


def resolve_database(
    path: Path,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    ctrl_c_stops: bool = False,
    limits: ImportLimits | None = None,
) -> tuple[Path, ImportResult | None]:
    """The SQLite file to open for ``path``: ``path`` itself for a database, else its import
    (within ``limits``; those of the saved settings when None).

    ``ctrl_c_stops`` (the command line): while the import runs, Ctrl+C sets its Stop event, so it
    ends the way the window's Stop ends it (its threads between two batches, nothing kept), then
    KeyboardInterrupt is raised.  A KeyboardInterrupt raised at an arbitrary point is safe too (the
    import waits for its threads before it lets one go up, :mod:`.threads`), but this way the
    message is the import's own and no half-done step is unwound by an exception.
    """
    path = Path(path).expanduser()
    if kind_of(path) is None:
        return path, None
    if not ctrl_c_stops or threading.current_thread() is not threading.main_thread():
        result = import_source(path, progress=progress, cancel=cancel, limits=limits)
        return result.db_path, result
    import signal

    stop = cancel or threading.Event()
    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: stop.set())
    try:
        result = import_source(path, progress=progress, cancel=stop, limits=limits)
    except ImportCancelled:
        if cancel is None or not cancel.is_set():
            raise KeyboardInterrupt from None
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
    return result.db_path, result


def import_source(
    source: Path,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    limits: ImportLimits | None = None,
) -> ImportResult:
    """Import ``source`` into the cache within ``limits`` (those of the saved settings when None),
    or reuse the import made while it was as it is now; one build of a source at a time
    (:mod:`.build_lock`: a second import waits, then reuses it)."""
    path = Path(os.path.abspath(Path(source).expanduser()))
    folder = cache_folder(path)
    if path.exists() and kind_of(path) is not None and not (folder / cache.MANIFEST).exists():
        # Never imported: the build will need the importer.  Its start (an interpreter and the
        # readers' package: 0.15-0.2 s) runs beside the steps below (the settings, the lock,
        # the cache's checks) instead of after them.
        isolated.start_ahead(request_follows=True)
    limits = limits or ImportLimits.saved()
    with build_lock.held(folder, cancel, path.name):
        try:
            return _import_source(path, folder, limits, progress, cancel)
        except BaseException:
            cache.forget_unbuilt(folder)
            raise


def _members(source: Path, kind: str) -> tuple[list[Path], list[str]]:
    """The files an import of ``source`` reads, and a note for each file of a folder it skips
    (the folder is listed once, here; the notes travel to the build)."""
    if kind == FOLDER:
        from sqale_desktop.core.imports import folders

        return folders.members(source, kind_of)
    beside = [source.with_name(source.name + suffix) for suffix in BY_KIND[kind].companions]
    return [source, *(p for p in beside if p.exists())], []


def _import_source(
    source: Path,
    folder: Path,
    limits: ImportLimits,
    progress: ProgressFn | None,
    cancel: threading.Event | None,
) -> ImportResult:
    """:func:`import_source` for an absolute ``source`` whose cache ``folder``'s lock is held."""
    if not source.exists():
        raise ImportFailed(f"{source} does not exist.")
    kind = kind_of(source)
    if kind is None:
        raise ImportFailed(f"{source.name} is not a kind of file that can be imported.")
    cache_bound.make_room(folder)  # the cache's size bound: least recently used imports go first
    db_path = folder / (printable(source.name) + ".sqlite")  # a name SQLite can be given as text
    members, skipped = _members(source, kind)
    if kind == FOLDER and not members:
        raise ImportFailed(folder_refusal(source.name))
    try:
        stats = cache.stat(members)
    except FileNotFoundError as exc:
        raise ImportFailed(f"{source.name} disappeared before it could be imported.") from exc
    reused, why_again = cache.reusable(folder, db_path, source, members, stats)
    if reused is not None:
        return reused
    plan = ImportPlan(source, kind, tuple(members), tuple(skipped), folder, db_path, limits)
    hashing = cache.Hashing(members)  # beside the import
    try:
        # every reader of the file runs in a child process: see .isolated
        result = isolated.build(plan, progress, cancel)
        for entry, digest in zip(stats, hashing.result(), strict=True):
            entry["sha256"] = digest
        same = cache.unchanged(members, stats)
    except FileNotFoundError as exc:
        cache.discard_building(folder)
        raise ImportFailed(
            f"{source.name} disappeared while it was being imported; nothing was kept."
        ) from exc
    finally:
        hashing.stop()
    if not same:
        cache.discard_building(folder)
        raise ImportFailed(
            f"{source.name} changed while it was being imported; nothing was kept: open it again."
        )
    if why_again:
        result.notes.insert(0, why_again + ": imported again")
    cache.commit(folder, db_path, result, stats, source)
    return result
