"""Checks on model files on disk: the GGUF magic and content hashes.

Hashing a 1.2 GB file takes seconds, so the hash functions report progress and can be cancelled
between blocks.
"""

from __future__ import annotations

import hashlib
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from sqale_desktop.core.models.errors import DownloadCancelled, InvalidModelFile

GGUF_MAGIC = b"GGUF"
HASH_BLOCK = 4 * 1024 * 1024

DiskUsage = Callable[[str], "shutil._ntuple_diskusage"]
"""``shutil.disk_usage`` or a stand-in (tests): the free-space probe of downloads and conversions."""
HashProgress = Callable[[int, int], None]
"""Called with (bytes hashed, total bytes)."""


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
    """Hex sha256 of a file, as the hub records it for LFS files."""
    return _hash_file(hashlib.sha256(), path, progress, cancel)


def git_blob_sha1(path: Path) -> str:
    """Git's blob id of a file: what the hub gives as the ETag of a small, non-LFS file."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    return _hash_file(digest, path, None, None)


def _hash_file(
    digest: hashlib._Hash,
    path: Path,
    progress: HashProgress | None,
    cancel: threading.Event | None,
) -> str:
    total = path.stat().st_size
    done = 0
    with path.open("rb") as handle:
        while block := handle.read(HASH_BLOCK):
            if cancel is not None and cancel.is_set():
                raise DownloadCancelled("Verification cancelled.")
            digest.update(block)
            done += len(block)
            if progress is not None:
                progress(done, total)
    return digest.hexdigest()
