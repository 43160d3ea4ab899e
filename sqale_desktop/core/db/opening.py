"""Deciding how to open a file read-only, and saying clearly why a file cannot be opened.

A plain ``mode=ro`` open is right for almost every file.  The exception is a database in WAL mode
inside a folder that must not be written to: reading it needs a ``-shm`` file next to it, which
cannot (or should not) be created, so the file is opened ``immutable=1`` instead and the user is
told that the view may be stale (an immutable open ignores the ``-wal`` file's newer pages).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from sqale_desktop.core.db.errors import DatabaseUnreadable, NotADatabase

SQLITE_MAGIC = b"SQLite format 3\x00"
STALE_NOTE = "opened as an immutable snapshot: the folder is read-only, so the view may be stale"


@dataclass(frozen=True)
class FileFacts:
    """What the header and the folder say about a database file before SQLite opens it."""

    path: Path
    is_wal: bool
    shm_exists: bool
    folder_writable: bool


def inspect_file(path: Path) -> FileFacts:
    """Check that ``path`` is a readable SQLite file; raise a clear error when it is not."""
    name = str(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise DatabaseUnreadable(f"cannot open {name}: no such file") from None
    except OSError as exc:
        raise DatabaseUnreadable(f"cannot open {name}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise NotADatabase(f"{name} is a folder, not a SQLite database file")
    if not stat.S_ISREG(info.st_mode):
        # Checked before reading: opening a FIFO would wait for a writer, /dev/zero never ends.
        raise NotADatabase(
            f"{name} is {_special_kind(info.st_mode)}, not a regular file: not a SQLite database"
        )
    if info.st_size == 0:
        raise NotADatabase(f"{name} is empty (0 bytes), not a SQLite database")
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except OSError as exc:
        raise DatabaseUnreadable(f"cannot read {name}: {exc.strerror or exc}") from None
    if not header.startswith(SQLITE_MAGIC):
        raise NotADatabase(f"{name} is not a SQLite database (its first bytes are not 'SQLite format 3')")
    if len(header) < 100:
        raise NotADatabase(f"{name} is not a SQLite database (the file is shorter than its header)")
    # Bytes 18 and 19 are the write and read format versions: 2 means WAL.
    is_wal = header[18] == 2 or header[19] == 2
    shm = path.with_name(path.name + "-shm")
    return FileFacts(
        path=path,
        is_wal=is_wal,
        shm_exists=shm.exists(),
        folder_writable=folder_is_writable(path.parent),
    )


def _special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def folder_is_writable(folder: Path) -> bool:
    """Whether the app may create files (a ``-shm``) in ``folder``.

    ``os.access`` answers for the process, but root passes it even on a folder laid out with no
    write bits at all; such a folder says "read-only" on purpose, so it counts as not writable.
    """
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        return False
    return os.access(folder, os.W_OK)


def sqlite_uri(path: Path, *, immutable: bool) -> str:
    """A ``file:`` URI that opens ``path`` read-only (and immutable when asked)."""
    query = "mode=ro&immutable=1" if immutable else "mode=ro"
    return f"{path.resolve().as_uri()}?{query}"
