"""Checks on model files on disk: the GGUF magic and content hashes.

Hashing a 1.2 GB file takes seconds; ``core.file_hash`` reads it in blocks, reporting progress
and looking at the cancel flag between them.
"""

from __future__ import annotations

import hashlib
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from sqale_desktop.core import file_hash
from sqale_desktop.core.errors import Cancelled
from sqale_desktop.core.file_hash import HashProgress as HashProgress
from sqale_desktop.core.models.errors import DownloadCancelled, InvalidModelFile

GGUF_MAGIC = b"GGUF"

DiskUsage = Callable[[str], "shutil._ntuple_diskusage"]
"""``shutil.disk_usage`` or a stand-in (tests): the free-space probe of downloads and conversions."""


def is_gguf(path: Path) -> bool:
    """Whether ``path`` starts with the GGUF magic (cheap: reads four bytes)."""
    try:
        with path.open("rb") as handle:
            return handle.read(4) == GGUF_MAGIC
    except OSError:
        return False


def require_gguf(path: Path) -> None:
    """Raise ``InvalidModelFile`` with a clear message unless ``path`` is a GGUF file."""
    if not path.is_file():
        raise InvalidModelFile(f"No such file: {path}")
    if not is_gguf(path):
        raise InvalidModelFile(
            f"{path.name} is not a GGUF model file (it does not start with 'GGUF'). "
            "Safetensors checkpoints must be converted first ('sqale-desktop models convert')."
        )


def sha256_file(
    path: Path,
    progress: HashProgress | None = None,
    cancel: threading.Event | None = None,
) -> str:
    """Hex sha256 of a file, as the hub records it for LFS files; ``DownloadCancelled`` when
    ``cancel`` is set meanwhile (the model commands and dialogs report a ``ModelError``)."""
    try:
        return file_hash.sha256_file(path, progress, cancel)
    except Cancelled:
        raise DownloadCancelled("Verification cancelled.") from None


def git_blob_sha1(path: Path) -> str:
    """Git's blob id of a file: what the hub gives as the ETag of a small, non-LFS file."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    return file_hash.hash_file(digest, path)
