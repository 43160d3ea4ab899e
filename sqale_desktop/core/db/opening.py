"""Deciding how to open a file read-only, and saying clearly why a file cannot be opened.

A plain ``mode=ro`` open is right for almost every file.  The exception is a database in WAL mode
inside a folder that must not be written to: reading it needs a ``-shm`` file next to it, which
cannot (or should not) be created, so the file is opened ``immutable=1`` instead and the user is
told that the view may be stale (an immutable open ignores the ``-wal`` file's newer pages).

Every connection to the file, the probe of ``open_readonly`` and each thread's link alike, comes
from :func:`connect_readonly`, with the limits below.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqale_desktop.core.db.errors import DatabaseUnreadable, NotADatabase

SQLITE_MAGIC = b"SQLite format 3\x00"
STALE_NOTE = "opened as an immutable snapshot: the folder is read-only, so the view may be stale"
# The largest single value (string or blob) a statement may make or read.  A value this size is
# already far beyond what a person or the model reads (the grid shows a blob's size, the model a
# cut-down cell); the bound keeps zeroblob()/randomblob() rows cheap enough that the time limit,
# checked between rows, still holds.
MAX_VALUE_BYTES = 64 * 1024 * 1024
# The longest statement accepted, in characters.  Longer text is refused before anything parses
# it: the keyword pre-check and SQLite's parser would otherwise spend seconds (or gigabytes) on it
# outside the time limit, and nobody types or generates a megabyte of SQL to ask a question.
MAX_SQL_CHARS = 1_000_000
# LIKE and GLOB compare in one C call, in time proportional to text length times pattern length
# (a 1 MB text against a 10 KB pattern: 40 s that no limit can interrupt).  Real patterns are
# a few dozen characters; SQLite's default allows 50,000.
MAX_LIKE_PATTERN_CHARS = 1000
# How often a statement that finds the file locked by another program tries again.  SQLite's own
# busy handler would wait inside one C call, deaf to Stop; retrying in our code keeps Stop and the
# time limit in charge, so the connection's busy timeout is 0.
LOCK_RETRY_S = 0.05


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


def decode_text(raw: bytes) -> str:
    """SQLite text as ``str``.  Real files hold invalid UTF-8 now and then; one bad cell must not
    fail the whole query, so bad bytes are replaced."""
    return raw.decode("utf-8", errors="replace")


def connect_readonly(
    path: Path, *, immutable: bool, decode: Callable[[bytes], str] = decode_text
) -> sqlite3.Connection:
    """A raw sqlite3 connection with every read-only setting applied but no authorizer yet.

    ``decode`` turns SQLite text into ``str`` (the evaluation's Spider metric drops bad bytes).
    """
    conn = sqlite3.connect(
        sqlite_uri(path, immutable=immutable),
        uri=True,
        isolation_level=None,
        timeout=0,  # a locked file is retried in link.Links.start, where Stop is heard
        check_same_thread=False,  # only so that close() and cursors may be used from another thread
    )
    conn.text_factory = decode
    conn.execute("PRAGMA query_only = 1")
    conn.execute("PRAGMA trusted_schema = 0")
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    # zeroblob(1e9) and friends allocate in one step, where the progress handler cannot stop them.
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 4 * MAX_SQL_CHARS)  # UTF-8 bytes
    conn.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, MAX_LIKE_PATTERN_CHARS)
    return conn


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says another program holds the file locked."""
    code = getattr(exc, "sqlite_errorname", "") or ""
    return code.startswith("SQLITE_BUSY") or str(exc) == "database is locked"


def locked_message(name: str, waited_s: float) -> str:
    """The message for a file another program holds locked (writing, or exclusive locking mode)."""
    return (
        f"{name} is locked by another program that is writing to it or holds it exclusively "
        f"(waited {waited_s:g} s); try again when that program has finished or closed it"
    )


def hot_journal_message(name: str) -> str:
    """The message for a file with a hot rollback journal: an unfinished transaction of another program.

    Reading it needs that transaction rolled back, which is a write; an ``immutable`` read would
    show the half-written pages as if committed, so the file is refused rather than misread.
    """
    return (
        f"cannot open {name}: it has an unfinished transaction from another program (a hot "
        f"journal, {Path(name).name}-journal), so it cannot be read safely read-only; open it once "
        "in a program that may write to it (or let the other program finish) to roll it back"
    )
