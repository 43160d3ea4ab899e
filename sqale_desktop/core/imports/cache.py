"""The import cache: one folder per source, a database vouched for by a manifest, reused while the
source is unchanged.

The manifest names the source and, for each file the import read, its size, mtime and SHA-256: an
import is reused only while all three are as they were, and built again, with a note saying why,
when one changed.  A new build is written into the folder's ``.building`` and renamed into place
when complete, then the manifest that vouches for it (:func:`commit`): a cancelled or failed import
leaves nothing that could be reused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sqale_desktop.core.file_hash import sha256_file
from sqale_desktop.core.imports import build_lock, cache_bound
from sqale_desktop.core.imports.result import ImportResult, TableSummary
from sqale_desktop.core.imports.threads import ImportThread, stop_and_wait

MANIFEST_VERSION = 1
MANIFEST = "manifest.json"
Stats = list[dict[str, Any]]


def cache_folder(source: Path) -> Path:
    """The cache folder of ``source``'s import (named after its resolved path)."""
    key = hashlib.sha256(str(source.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return cache_bound.imports_root() / key


def stat(paths: list[Path]) -> Stats:
    """The name, size and mtime of each file an import reads (``FileNotFoundError`` for one gone)."""
    out = []
    for p in paths:
        st = p.stat()
        out.append({"name": p.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return out


class Hashing:
    """The SHA-256 of each member, computed in a thread while the import runs (hashlib releases
    the GIL: on a 1 GB CSV a second of one core the import no longer waits for); :meth:`stop` ends
    it early (an import that failed or was stopped does not wait for a hash it will not use)."""

    def __init__(self, members: list[Path]) -> None:
        self._stop = threading.Event()
        self._digests: list[str] = []
        self._error: BaseException | None = None
        self._thread = ImportThread(lambda: self._run(members), "import-hash")
        self._thread.start()

    def _run(self, members: list[Path]) -> None:
        try:
            self._digests = [sha256_file(p, cancel=self._stop) for p in members]
        except BaseException as exc:  # raised in the importing thread by result()
            self._error = exc

    def result(self) -> list[str]:
        self._thread.ended.wait()  # not Thread.join: see .threads
        if self._error is not None:
            raise self._error
        return self._digests

    def stop(self) -> None:
        stop_and_wait(self._stop, self._thread)


def reusable(
    folder: Path, db_path: Path, source: Path, members: list[Path], stats: Stats
) -> tuple[ImportResult | None, str | None]:
    """(the import made while ``source`` was as it is now, or None; when None, why it is built
    again, or None for a source never imported)."""
    manifest = _load_manifest(folder / MANIFEST)
    if manifest is None or not db_path.is_file() or manifest.get("source") != str(source.resolve()):
        return None, None
    old = manifest.get("members", [])
    if _identities(old) != stats:
        return None, f"{source.name} changed since it was imported"
    if [m.get("sha256") for m in old] != [sha256_file(p) for p in members]:
        return None, f"{source.name} changed since it was imported (same size and time, new content)"
    return _result_from(manifest, db_path), None


def unchanged(members: list[Path], stats: Stats) -> bool:
    """Whether ``members`` still have the size and mtime ``stats`` recorded before the build."""
    return stat(members) == _identities(stats)


def _identities(stats: Stats) -> Stats:
    return [{k: m[k] for k in ("name", "size", "mtime_ns")} for m in stats]


def discard_building(folder: Path) -> None:
    """Remove what a build left in ``folder`` (its ``.building``)."""
    shutil.rmtree(folder / cache_bound.BUILDING, ignore_errors=True)


def forget_unbuilt(folder: Path) -> None:
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


def _load_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("version") == MANIFEST_VERSION else None


def _result_from(manifest: dict[str, Any], db_path: Path) -> ImportResult:
    return ImportResult(
        db_path,
        Path(manifest["source"]),
        manifest["summary"],
        [TableSummary(**t) for t in manifest["tables"]],
        list(manifest["notes"]),
        list(manifest["foreign_keys"]),
        reused=True,
    )


def commit(folder: Path, db_path: Path, result: ImportResult, stats: Stats, source: Path) -> None:
    """Move the finished file into place, then the manifest that vouches for it (both renames);
    ``stats`` carry each member's SHA-256."""
    building = folder / cache_bound.BUILDING / db_path.name
    with contextlib.suppress(FileNotFoundError):
        (folder / MANIFEST).unlink()  # the old file is no longer vouched for
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
    os.replace(tmp, folder / MANIFEST)
    discard_building(folder)
