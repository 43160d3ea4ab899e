"""Content hashes of large files, read in blocks, with progress and a cancel flag.

One reader for every place that names a file by its content: a download checked against the
hub's sha256, the model registry, the import cache, the llama engine's saved states and an
evaluation's record of the weights.  A GGUF of a GB takes seconds, so the loop reports progress
and looks at ``cancel`` between blocks (a Stop is heard within one block).  Depends on nothing in
the package but the error model.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from sqale_desktop.core.errors import Cancelled

BLOCK = 4 * 1024 * 1024

HashProgress = Callable[[int, int], None]
"""Called with (bytes hashed, total bytes)."""


class Digest(Protocol):
    """What ``hashlib``'s objects offer (``hashlib._Hash`` is private)."""

    def update(self, data: bytes, /) -> None: ...

    def hexdigest(self) -> str: ...


def sha256_file(
    path: Path, progress: HashProgress | None = None, cancel: threading.Event | None = None
) -> str:
    """Hex sha256 of the file's content (what the hub records for LFS files).

    Raises ``OSError`` when it cannot be read, :class:`~sqale_desktop.core.errors.Cancelled` when
    ``cancel`` is set meanwhile.
    """
    return hash_file(hashlib.sha256(), path, progress, cancel)


def hash_file(
    digest: Digest,
    path: Path,
    progress: HashProgress | None = None,
    cancel: threading.Event | None = None,
) -> str:
    """``digest`` fed with the file's content (after whatever it was fed before), as hex."""
    total = path.stat().st_size
    done = 0
    with path.open("rb") as handle:
        while block := handle.read(BLOCK):
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"Hashing {path.name} was cancelled.")
            digest.update(block)
            done += len(block)
            if progress is not None:
                progress(done, total)
    return digest.hexdigest()
