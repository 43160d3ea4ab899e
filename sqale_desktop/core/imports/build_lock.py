"""One build of a source at a time, across threads and processes (two windows, the CLI and a window).

Two imports of the same file used to share the cache folder's ``.building`` directory, and each
removed the other's work: both failed.  Now the build (from reading the manifest to renaming the
finished file into place) holds an exclusive lock on the folder's ``.lock`` file (``filelock``:
an ``flock`` on POSIX, released by the system if the process dies), so the second import waits
for the first and then finds its result in the cache and reuses it.  The wait is checked against
Stop every tenth of a second.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqale_desktop.core.imports.progress import ImportCancelled, printable

LOCK_FILE = ".lock"
POLL_S = 0.1


@contextmanager
def held(folder: Path, cancel: threading.Event | None, name: str) -> Iterator[None]:
    """Hold ``folder``'s build lock for the ``with`` block; :class:`ImportCancelled` when
    ``cancel`` is set while another import of the same source holds it."""
    from filelock import FileLock, Timeout

    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / LOCK_FILE))
    while True:
        try:
            lock.acquire(timeout=POLL_S)
            break
        except Timeout:
            if cancel is not None and cancel.is_set():
                raise ImportCancelled(
                    f"Import of {printable(name)} stopped while another import of it ran; nothing was kept."
                ) from None
    try:
        yield
    finally:
        lock.release()
