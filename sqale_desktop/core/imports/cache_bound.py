"""The import cache's bound: least recently used imports go once the cache passes its size.

Every imported source has a folder in the cache (``cache_dir()/imports/<key>``: the SQLite file
and its manifest).  Nothing removed them, and one session left 760 MB behind.  Now each import
marks its folder used (a ``.last-used`` stamp: access times are often not kept) and makes room
first (``make_room``, the one call, from ``import_source``): while the cache holds more than
the ``import_cache_limit_mb`` setting, the folder used least recently goes, except the one being
imported and any whose file is open.

"Open" holds across processes (each launch is its own process, and imports may run in a child):
whoever opens a cached database holds a shared ``flock`` on its folder's ``.in-use`` file
(``hold``, taken by ``core.db.connection.ReadOnlyDatabase``), and a folder is removed only
under an exclusive lock taken without waiting, so never while anyone has it open.  A folder with
an import still building (``.building``, touched within ``BUILDING_GRACE_S``) stays too.  Where
there is no ``flock`` (Windows) nothing open can be removed either: removing it fails, and the
folder is kept.  Settings shows the size (``cache_size``) and clears what is not open (``clear``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

IMPORTS_DIR = "imports"  # under paths.cache_dir(): one folder per imported source (cache_folder)
STAMP = ".last-used"
IN_USE = ".in-use"
BUILDING = ".building"
# A folder whose build was touched this recently is an import still running (a crashed one's
# leftovers go after this long).
BUILDING_GRACE_S = 6 * 3600.0
MB = 1024 * 1024


@dataclass(frozen=True)
class CacheState:
    """What the cache holds: ``bytes`` in ``imports`` folders; ``removed`` folders and the
    ``freed`` bytes of the last trim; ``kept_open`` folders that were over the bound but open."""

    bytes: int
    imports: int
    removed: int = 0
    freed: int = 0
    kept_open: int = 0


def imports_root() -> Path:
    """The folder that holds one folder per imported source."""
    from sqale_desktop.core.paths import cache_dir

    return cache_dir() / IMPORTS_DIR


def copy_folder(db_path: Path) -> Path | None:
    """The cache folder that holds ``db_path`` when it is an imported copy; None for any other
    file (a database the person opened)."""
    folder = db_path.resolve().parent
    return folder if folder.parent == imports_root().resolve() else None


def _size(folder: Path) -> int:
    total = 0
    for base, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(base, name)).st_size
    return total


def _last_used(folder: Path) -> float:
    for name in (STAMP, "manifest.json"):
        with contextlib.suppress(OSError):
            return (folder / name).stat().st_mtime
    with contextlib.suppress(OSError):
        return folder.stat().st_mtime
    return 0.0


def _building(folder: Path, now: float) -> bool:
    try:
        return now - (folder / BUILDING).stat().st_mtime < BUILDING_GRACE_S
    except OSError:
        return False


def _folders(root: Path) -> list[Path]:
    try:
        return [entry for entry in root.iterdir() if entry.is_dir() and not entry.is_symlink()]
    except OSError:
        return []


def mark_used(folder: Path) -> None:
    """Stamp ``folder`` as used now (it goes last)."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / STAMP
    stamp.touch()
    now = time.time()
    os.utime(stamp, (now, now))


def cache_size(root: Path | None = None) -> CacheState:
    """The bytes and the number of imports in the cache now."""
    folders = _folders(root or imports_root())
    return CacheState(sum(_size(f) for f in folders), len(folders))


def _remove_unless_open(folder: Path) -> bool:
    """Remove ``folder`` under an exclusive lock on its ``.in-use`` file; False when it is open."""
    if fcntl is None:
        try:
            shutil.rmtree(folder)
        except OSError:
            return False  # a file in it is open (Windows refuses to delete it)
        return True
    try:
        fd = os.open(folder / IN_USE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # someone holds it open
        shutil.rmtree(folder, ignore_errors=True)
        return not folder.exists()
    finally:
        os.close(fd)


def trim(limit_bytes: int, keep: Path | None = None, root: Path | None = None) -> CacheState:
    """Remove the least recently used folders until the cache holds at most ``limit_bytes``;
    never ``keep``, a folder in use, or an import still building."""
    root = root or imports_root()
    now = time.time()
    entries = [(f, _size(f), _last_used(f)) for f in _folders(root)]
    total = sum(size for _f, size, _t in entries)
    removed = freed = kept_open = 0
    kept = keep.resolve() if keep is not None else None
    for folder, size, _t in sorted(entries, key=lambda entry: entry[2]):
        if total <= limit_bytes:
            break
        if (kept is not None and folder.resolve() == kept) or _building(folder, now):
            continue
        if _remove_unless_open(folder):
            total -= size
            removed += 1
            freed += size
        else:
            kept_open += 1
    return CacheState(total, len(entries) - removed, removed, freed, kept_open)


def clear(root: Path | None = None) -> CacheState:
    """Settings' Clear: every import that is not open now (they are made again when opened)."""
    return trim(0, root=root)


def make_room(folder: Path) -> CacheState:
    """Before importing into ``folder``: mark it used and trim the others to the setting's bound."""
    from sqale_desktop.core import settings as settings_mod

    mark_used(folder)
    limit_mb = settings_mod.load().settings.import_cache_limit_mb
    return trim(limit_mb * MB, keep=folder, root=folder.parent)


class InUse:
    """A shared lock on a cached import's folder while a database handle has its file open."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle: IO[bytes] | None = handle

    def release(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()  # closing the descriptor drops its flock


def hold(db_path: Path) -> InUse | None:
    """Mark ``db_path``'s cache folder open (until ``release``); None for a file not in the cache."""
    if fcntl is None:
        return None
    try:
        folder = copy_folder(db_path)
        if folder is None:
            return None
        handle = open(folder / IN_USE, "ab")  # noqa: SIM115  (held open while the file is in use)
    except OSError:
        return None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # being removed this moment: the open that follows fails and says so
        handle.close()
        return None
    return InUse(handle)
