"""Leaving no ``-shm`` (or empty ``-wal``) behind: the files a read of a WAL database creates.

Reading a WAL database needs its ``-shm`` file (and opens its ``-wal``); when they do not exist,
SQLite creates them (the ``-wal`` empty), and a read-only connection never deletes them on close
(only a connection that may write checkpoints and cleans up).  So the app removes what it caused,
when the last handle on that file in this process closes, and only when that is safe:

- Every SQLite connection that uses a ``-shm`` holds a shared POSIX lock on its "DMS" byte for as
  long as it is open (``unixLockSharedMemory`` in SQLite's os_unix.c).  Taking a write lock on that
  byte, without waiting, therefore succeeds only if no other program has the file in use; if one
  does, the file is left alone (it is theirs now, and their SQLite removes it when it is done).
- The files are unlinked while the lock is held; a ``-wal`` only if it is still empty (a ``-wal``
  with content holds committed data of another program and is never touched).  A program that
  opens the database at that moment finds the DMS byte locked, gets SQLITE_BUSY and retries, and
  on retry creates a fresh ``-shm``: no two programs can use different ``-shm`` files for one
  database.
- Nothing else in this process may still use it: POSIX locks belong to the process, so the test
  would succeed against our own connections, and closing our descriptor drops their locks.  Hence
  the count of open handles per file, and the cleanup only at zero.

On systems without POSIX record locks (Windows) nothing is removed: there SQLite's own rules
differ, and leaving the file is safe where removing it might not be.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

# (22 + SQLITE_SHM_NLOCK) * 4 + SQLITE_SHM_NLOCK, with SQLITE_SHM_NLOCK = 8: os_unix.c's UNIX_SHM_DMS.
SHM_DMS_BYTE = 128

_lock = threading.Lock()
# resolved path -> [open handles, 1 if they created the -shm, 1 if they created the -wal]
_open: dict[str, list[int]] = {}


def shm_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + "-shm")


def wal_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + "-wal")


def opened(db_path: Path, *, created_shm: bool, created_wal: bool) -> None:
    """A handle on ``db_path`` was opened; ``created_*``: that file did not exist before it."""
    key = str(db_path.resolve())
    with _lock:
        entry = _open.setdefault(key, [0, 0, 0])
        entry[0] += 1
        entry[1] |= int(created_shm)
        entry[2] |= int(created_wal)


def closed(db_path: Path) -> bool:
    """A handle on ``db_path`` was closed (its connections too); True if the ``-shm`` was removed."""
    key = str(db_path.resolve())
    with _lock:
        entry = _open.get(key)
        if entry is None:
            return False
        entry[0] -= 1
        if entry[0] > 0:
            return False
        del _open[key]
        return bool(entry[1]) and remove_if_unused(db_path, empty_wal=bool(entry[2]))


def forget_failed_open(db_path: Path, *, shm_existed: bool, wal_existed: bool) -> None:
    """Opening ``db_path`` failed after a probe may have created its files: remove those too."""
    with _lock:
        if not shm_existed and str(db_path.resolve()) not in _open:
            remove_if_unused(db_path, empty_wal=not wal_existed)


def remove_if_unused(db_path: Path, *, empty_wal: bool) -> bool:
    """Remove ``db_path``'s ``-shm`` if no program has it in use (see the module docstring).

    ``empty_wal``: also remove the ``-wal`` if it is empty (the app created it).
    """
    if fcntl is None:
        return False
    shm = shm_path(db_path)
    try:
        fd = os.open(shm, os.O_RDWR)
    except OSError:
        return False  # gone already, or not ours to open
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, SHM_DMS_BYTE, os.SEEK_SET)
        except OSError:
            return False  # another program holds it open
        wal = wal_path(db_path)
        try:
            if empty_wal and wal.stat().st_size == 0:
                os.unlink(wal)
        except OSError:
            pass  # no -wal, or not removable: the -shm can still go
        try:
            os.unlink(shm)
        except OSError:
            return False
        return True
    finally:
        os.close(fd)  # also releases the lock
