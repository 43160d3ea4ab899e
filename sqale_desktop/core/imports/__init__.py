"""Data files people have (CSV, TSV, JSON, Excel, Parquet, DuckDB, a folder of them) as SQLite.

Datasette's way: the file is turned into a SQLite database, and everything the app does with a
database (the read-only guard, the tools, the grid, the agent, history, evaluation) works on it
unchanged.  The database lives in the app's cache, never next to the source, one per source,
keyed by the source's path and checked against its size, mtime and SHA-256: it is reused while the
source is unchanged and built again, with a note saying so, when it changed.  It is built in a
temporary folder and renamed into place only when complete, so a cancelled or failed import leaves
nothing that could be reused; the source is only ever read.  The build itself (every reader of the
file) runs in a child process under the memory cap, killed on Stop (:mod:`.isolated`).

:func:`resolve_database` is what every open path calls: a SQLite file comes back as it is, any
other supported source comes back as the path of its imported database.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqale_desktop.core.imports import build_lock, cache_bound, isolated
from sqale_desktop.core.imports.isolated import ImportCrashed
from sqale_desktop.core.imports.progress import (
    ImportCancelled,
    ImportFailed,
    ImportProgress,
    Meter,
    ProgressFn,
    printable,
)
from sqale_desktop.core.imports.threads import ImportThread, stop_and_wait

__all__ = [
    "DIALOG_PATTERNS",
    "ImportCancelled",
    "ImportCrashed",
    "ImportFailed",
    "ImportProgress",
    "ImportResult",
    "import_source",
    "kind_of",
    "resolve_database",
]

log = logging.getLogger(__name__)

MANIFEST_VERSION = 1
TEXT_SUFFIXES = {
    ".csv": "csv",
    ".tsv": "csv",
    ".tab": "csv",
    ".txt": "csv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}
OTHER_SUFFIXES = {
    ".xlsx": "excel",
    ".xlsm": "excel",
    ".ods": "excel",
    ".parquet": "parquet",
    ".duckdb": "duckdb",
}
# The file dialog's filter (Qt's "Name (*.a *.b)" patterns), kept beside the list it describes.
DIALOG_PATTERNS = " ".join(
    f"*{s}" for s in [*TEXT_SUFFIXES, *OTHER_SUFFIXES] + [f"{s}.gz" for s in TEXT_SUFFIXES]
)


def kind_of(path: Path) -> str | None:
    """What ``path`` is to import as (``csv``, ``json``, ``jsonl``, ``excel``, ``parquet``,
    ``duckdb``, ``folder``), or None for a SQLite database or a file of no known kind."""
    if path.is_dir():
        return "folder"
    if path.exists() and not path.is_file():
        return None  # a FIFO or a device: reading it could block; the database path says what it is
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if not suffixes:
        return None
    if suffixes[-1] == ".gz":
        return TEXT_SUFFIXES.get(suffixes[0]) if len(suffixes) == 2 else None
    last = suffixes[-1]
    if last in TEXT_SUFFIXES:
        return TEXT_SUFFIXES[last]
    if last in OTHER_SUFFIXES:
        return OTHER_SUFFIXES[last]
    if _is_duckdb(path):
        return "duckdb"  # a DuckDB database named .db: its magic is at offset 8
    return None


def _is_duckdb(path: Path) -> bool:
    if not path.is_file():
        return False  # never open a FIFO or a device to sniff it: the open blocks
    try:
        with open(path, "rb") as handle:
            return handle.read(12)[8:12] == b"DUCK"
    except OSError:
        return False


@dataclass
class TableSummary:
    name: str
    source: str
    rows: int
    columns: int


@dataclass
class ImportResult:
    """What an import made: the database, where it came from, and what a person should know."""

    db_path: Path
    source: Path
    summary: str
    tables: list[TableSummary] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    foreign_keys: list[str] = field(default_factory=list)
    reused: bool = False

    def details(self) -> str:
        """Several lines for the tab's details: the summary, the tables, the keys, the notes."""
        lines = [self.summary, f"Imported copy: {self.db_path}"]
        lines += [f"• {t.name}: {t.rows:,} rows × {t.columns} columns (from {t.source})" for t in self.tables]
        if self.foreign_keys:
            lines.append("Foreign keys inferred:")
            lines += [f"• {fk}" for fk in self.foreign_keys]
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)


def resolve_database(
    path: Path,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    ctrl_c_stops: bool = False,
) -> tuple[Path, ImportResult | None]:
    """The SQLite file to open for ``path``: ``path`` itself for a database, else its import.

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
        result = import_source(path, progress=progress, cancel=cancel)
        return result.db_path, result
    import signal

    stop = cancel or threading.Event()
    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: stop.set())
    try:
        result = import_source(path, progress=progress, cancel=stop)
    except ImportCancelled:
        if cancel is None or not cancel.is_set():
            raise KeyboardInterrupt from None
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
    return result.db_path, result


def _members(source: Path) -> tuple[list[Path], list[str]]:
    """The files an import of ``source`` reads, and a note for each file of a folder it skips
    (the folder is listed once, here; the notes travel to the build)."""
    if source.is_dir():
        from sqale_desktop.core.imports import folders

        return folders.members(source, kind_of)
    members = [source]
    wal = source.with_name(source.name + ".wal")
    if kind_of(source) == "duckdb" and wal.exists():
        members.append(wal)
    return members, []


def _stat(paths: list[Path]) -> list[dict[str, Any]]:
    out = []
    for p in paths:
        st = p.stat()
        out.append({"name": p.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return out


def _sha256(path: Path, stop: threading.Event | None = None) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            if stop is not None and stop.is_set():
                raise InterruptedError("hashing stopped")
            digest.update(chunk)
    return digest.hexdigest()


class _Hashing:
    """The SHA-256 of each member, computed in a thread while the import runs; :meth:`stop` ends it
    early (an import that failed or was stopped does not wait for a hash it will not use)."""

    def __init__(self, members: list[Path]) -> None:
        self._stop = threading.Event()
        self._digests: list[str] = []
        self._error: BaseException | None = None
        self._thread = ImportThread(lambda: self._run(members), "import-hash")
        self._thread.start()

    def _run(self, members: list[Path]) -> None:
        try:
            self._digests = [_sha256(p, self._stop) for p in members]
        except BaseException as exc:  # raised in the importing thread by result()
            self._error = exc

    def result(self) -> list[str]:
        self._thread.ended.wait()  # not Thread.join: see .threads
        if self._error is not None:
            raise self._error
        return self._digests

    def stop(self) -> None:
        stop_and_wait(self._stop, self._thread)


def cache_folder(source: Path) -> Path:
    """The cache folder of ``source``'s import (named after its resolved path)."""
    key = hashlib.sha256(str(source.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return cache_bound.imports_root() / key


def import_source(
    source: Path,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> ImportResult:
    """Import ``source`` into the cache, or reuse the import made while it was as it is now; one
    build of a source at a time (:mod:`.build_lock`: a second import waits, then reuses it)."""
    path = Path(os.path.abspath(Path(source).expanduser()))
    folder = cache_folder(path)
    with build_lock.held(folder, cancel, path.name):
        try:
            return _import_source(path, folder, progress, cancel)
        except BaseException:
            _forget_unbuilt(folder)
            raise


def _forget_unbuilt(folder: Path) -> None:
    """A failed or stopped import keeps nothing: when its folder holds no earlier import, only the
    build lock and the cache's use stamp, the folder goes too (called holding the lock).

    The lock file is unlinked while held: an import of the same source already waiting on it gets
    it next and builds the folder again; only a third one starting in that instant could build
    beside it (it would lock a new file), and both would write the same thing.
    """
    try:
        names = {entry.name for entry in folder.iterdir()}
    except OSError:
        return
    if names <= {build_lock.LOCK_FILE, cache_bound.STAMP}:
        for name in (cache_bound.STAMP, build_lock.LOCK_FILE):
            with contextlib.suppress(OSError):
                (folder / name).unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()


def _import_source(
    source: Path,
    folder: Path,
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
    members, skipped = _members(source)
    if kind == "folder" and not members:
        raise ImportFailed(
            f"The folder {source.name} holds no CSV, TSV, JSON, Excel, Parquet or DuckDB file."
        )
    try:
        stats = _stat(members)
    except FileNotFoundError as exc:
        raise ImportFailed(f"{source.name} disappeared before it could be imported.") from exc
    manifest = _load_manifest(folder / "manifest.json")
    why_again = None
    if manifest is not None and db_path.is_file() and manifest.get("source") == str(source.resolve()):
        old = manifest.get("members", [])
        if [{k: m[k] for k in ("name", "size", "mtime_ns")} for m in old] == stats:
            hashes = [_sha256(p) for p in members]
            if [m.get("sha256") for m in old] == hashes:
                return _result_from(manifest, db_path, reused=True)
            why_again = f"{source.name} changed since it was imported (same size and time, new content)"
        else:
            why_again = f"{source.name} changed since it was imported"
    # The hash is read beside the import (hashlib releases the GIL): on a 1 GB CSV it is a second
    # of one core that the import no longer waits for.
    hashing = _Hashing(members)
    try:
        # every reader of the file runs in a child process: see .isolated
        result = isolated.build(source, kind, members, skipped, folder, db_path, progress, cancel)
        for entry, digest in zip(stats, hashing.result(), strict=True):
            entry["sha256"] = digest
    except FileNotFoundError as exc:
        shutil.rmtree(folder / ".building", ignore_errors=True)
        raise ImportFailed(
            f"{source.name} disappeared while it was being imported; nothing was kept."
        ) from exc
    finally:
        hashing.stop()
    try:
        after = _stat(members)
    except FileNotFoundError as exc:
        shutil.rmtree(folder / ".building", ignore_errors=True)
        raise ImportFailed(
            f"{source.name} disappeared while it was being imported; nothing was kept."
        ) from exc
    if after != [{k: m[k] for k in ("name", "size", "mtime_ns")} for m in stats]:
        shutil.rmtree(folder / ".building", ignore_errors=True)
        raise ImportFailed(
            f"{source.name} changed while it was being imported; nothing was kept: open it again."
        )
    if why_again:
        result.notes.insert(0, why_again + ": imported again")
    _commit(folder, db_path, result, stats, source)
    return result


def _load_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("version") == MANIFEST_VERSION else None


def _result_from(manifest: dict[str, Any], db_path: Path, reused: bool) -> ImportResult:
    return ImportResult(
        db_path,
        Path(manifest["source"]),
        manifest["summary"],
        [TableSummary(**t) for t in manifest["tables"]],
        list(manifest["notes"]),
        list(manifest["foreign_keys"]),
        reused=reused,
    )


def _commit(
    folder: Path, db_path: Path, result: ImportResult, stats: list[dict[str, Any]], source: Path
) -> None:
    """Move the finished file into place, then the manifest that vouches for it (both renames)."""
    building = folder / ".building" / db_path.name
    with contextlib.suppress(FileNotFoundError):
        (folder / "manifest.json").unlink()  # the old file is no longer vouched for
    os.replace(building, db_path)
    manifest = {
        "version": MANIFEST_VERSION,
        "source": str(source.resolve()),
        "members": stats,
        "summary": result.summary,
        "tables": [asdict(t) for t in result.tables],
        "notes": result.notes,
        "foreign_keys": result.foreign_keys,
    }
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".manifest-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        # ASCII escapes: a source path that is not UTF-8 (lone surrogates) is written, and read back, exactly
        json.dump(manifest, handle, ensure_ascii=True, indent=1)
    os.replace(tmp, folder / "manifest.json")
    shutil.rmtree(folder / ".building", ignore_errors=True)


def _build(
    source: Path,
    kind: str,
    members: list[Path],
    skipped: list[str],
    folder: Path,
    db_path: Path,
    progress: ProgressFn | None,
    cancel: threading.Event | None,
) -> ImportResult:
    from sqale_desktop.core.imports import builder as builder_mod
    from sqale_desktop.core.imports import foreign_keys, names

    building = folder / ".building"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True, exist_ok=True)
    target = building / db_path.name
    meter = Meter(sum(p.stat().st_size for p in members), progress, cancel)
    conn: sqlite3.Connection | None = None
    notes = list(skipped)  # a folder's files passed over when it was listed
    try:
        written = None
        if kind in ("csv", "parquet"):
            # One file: the fast path writes the final file itself, before sqlite3 opens it.
            meter.start_file(source.name)
            name = names.unique_table(_stem(source), set())
            if kind == "csv":
                written = _fast_csv(source, target, name, meter)
            else:
                from sqale_desktop.core.imports import typed

                written = _fast_typed(
                    typed.read_parquet(source, meter, name), target, name, source.name, meter
                )
        conn = builder_mod.open_build(target)
        build = builder_mod.Builder(conn)
        files = [m for m in members if not m.name.endswith(".wal")]
        for member in files:
            if written is not None:
                build.adopt(written, None, "")
                continue
            if kind != "folder":
                _add_file(build, member, kind_of(member) or "", meter, notes, in_folder=False)
                continue
            try:  # one bad file of a folder is skipped with a note; the others are imported
                _add_file(build, member, kind_of(member) or "", meter, notes, in_folder=True)
            except ImportCancelled:
                raise
            except ImportFailed as exc:
                meter.rewind()
                notes.append(f"{printable(member.name)} skipped: {exc}")
        if kind == "folder" and not build.staged:
            raise ImportFailed(f"No file of the folder {source.name} could be imported: " + "; ".join(notes))
        meter.finish()
        if kind in ("folder", "excel"):
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
    summary = printable(_summary(source, kind, build.staged, files))
    return ImportResult(db_path, source, summary, tables, notes, fks)


def _resolve_declared_keys(build: Any) -> None:
    """Keys a DuckDB file declared name its own tables: point them at the imported names."""
    by_label = {t.source.split(" ⟶ ")[-1]: t.name for t in build.staged}
    names = {t.name for t in build.staged}
    for table in build.staged:
        kept = []
        for column, ref_table, ref_column, why in table.foreign_keys:
            target = ref_table if ref_table in names else by_label.get(ref_table)
            if target is not None:
                kept.append((column, target, ref_column, why))
        table.foreign_keys = kept


def _scratch(build: Any) -> Path:
    """The file a fast path writes one table of several into, beside the new database."""
    return Path(build.conn.execute("PRAGMA database_list").fetchone()[2]).with_suffix(".fast")


def _stem(path: Path) -> str:
    """The table name a file suggests: its name before the first dot (``sales.csv.gz``: sales)."""
    return printable(path.name.split(".")[0] if path.name.split(".")[0] else path.stem)


def _fast_csv(path: Path, target: Path, table_name: str, meter: Meter) -> Any:
    """The table the fast CSV path (:mod:`.fast_text`) wrote into ``target``, or None when the file
    is small or the general path must import it (the reason is logged)."""
    from sqale_desktop.core.imports import fast_text

    if not fast_text.wanted(path):
        return None
    try:
        return fast_text.write_table(path, target, table_name, path.name, meter)
    except fast_text.NotFast as exc:
        log.info("%s: imported by the general text path (%s)", path.name, exc)
        return None


def _fast_typed(
    table: Any, target: Path, table_name: str, source: str, meter: Meter, own_file: bool = False
) -> Any:
    """The table the fast Arrow path (:mod:`.fast_typed`) wrote into ``target``, or None when it is
    small or the general path must import it (the reason is logged).  ``own_file``: the table is
    one of several, copied into the final file by the builder, which declares its keys there."""
    from sqale_desktop.core.imports import fast_text, fast_typed

    if not fast_typed.wanted(table):
        return None
    try:
        return fast_typed.write_table(table, target, table_name, source, meter, constraints=not own_file)
    except fast_text.NotFast as exc:
        log.info("%s: imported by the general path (%s)", source, exc)
        return None


def _add_file(build: Any, path: Path, kind: str, meter: Meter, notes: list[str], in_folder: bool) -> None:
    from sqale_desktop.core.imports import excel, json_source, text, typed

    meter.start_file(path.name)
    stem = _stem(path)
    if kind == "csv":
        scratch = _scratch(build)
        fast = _fast_csv(path, scratch, "t", meter) if in_folder else None
        if fast is not None:
            build.adopt(fast, scratch, stem)
            return
        try:
            build.stage_text(text.read_csv(path, meter, stem), path.name)
        except UnicodeDecodeError:
            table = text.read_csv(path, meter, stem, encoding="latin-1")
            table.notes.append(text.MIXED_ENCODING_NOTE)
            build.stage_text(table, path.name)
    elif kind == "json":
        for table in json_source.read_json(path, meter, stem):
            build.stage_text(table, path.name)
    elif kind == "jsonl":
        build.stage_text(json_source.read_json_lines(path, meter, stem), path.name)
    elif kind == "excel":
        for table in excel.read_workbook(path, meter, stem if in_folder else None):
            build.stage_text(table, f"{path.name} ⟶ sheet {table.name}")
    elif kind == "parquet":
        parquet = typed.read_parquet(path, meter, stem)
        scratch = _scratch(build)
        fast = _fast_typed(parquet, scratch, "t", path.name, meter, own_file=True)
        if fast is not None:
            build.adopt(fast, scratch, stem)
        else:
            build.stage_typed(parquet, path.name)
    elif kind == "duckdb":
        scratch = _scratch(build)
        with typed.open_duckdb(path, meter, path.name) as typed_tables:
            for typed_table in typed_tables:
                label = f"{path.name} ⟶ {typed_table.name}"
                fast = _fast_typed(typed_table, scratch, "t", label, meter, own_file=True)
                if fast is not None:
                    build.adopt(fast, scratch, typed_table.name)
                else:
                    build.stage_typed(typed_table, label)
    else:
        notes.append(f"{path.name} not imported: not a supported kind of file")


def _summary(source: Path, kind: str, staged: list[Any], files: list[Path]) -> str:
    def plural(n: int, word: str) -> str:
        return f"{n:,} {word}" + ("" if n == 1 else "s")

    if kind == "folder":
        return f"{source.name}/ — {plural(len(files), 'file')} imported as {plural(len(staged), 'table')}"
    if kind == "excel":
        return f"{source.name} — {plural(len(staged), 'sheet')} imported as tables"
    if kind == "duckdb":
        return f"{source.name} — {plural(len(staged), 'table')} imported from DuckDB"
    if len(staged) == 1:
        return f"{source.name} — imported as table {staged[0].name} ({plural(staged[0].rows, 'row')})"
    return f"{source.name} — imported as {plural(len(staged), 'table')}"
