"""Where a downloaded file goes in huggingface_hub's standard cache, so other tools share it.

The layout is the one huggingface_hub documents (``models--org--name/blobs/<etag>``,
``snapshots/<commit>/<file>`` linking to the blob, ``refs/<branch>`` holding the commit); the
library's ``try_to_load_from_cache`` and ``hf_hub_download(local_files_only=True)`` find files
placed here.  Our partial download sits next to the blob as ``<etag>.sqale.incomplete``: unlike
the library's own temporary file (unique per process and deleted on failure since
huggingface_hub 1.x) it survives a crash or a restart, which is what makes resuming possible.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

PARTIAL_SUFFIX = ".sqale.incomplete"
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


def default_cache_dir() -> Path:
    """The hub cache in use (``HF_HUB_CACHE`` / ``HF_HOME``), read from the library at call time."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


@dataclass(frozen=True)
class CachePaths:
    """Paths of one file of one repository at one commit in the hub cache."""

    repo_dir: Path
    blob: Path
    partial: Path
    pointer: Path
    lock: Path
    """The lock huggingface_hub itself takes for this blob, so we and it never write it at once."""

    @classmethod
    def of(cls, cache_dir: Path, repo: str, name: str, commit: str, etag: str) -> CachePaths:
        from huggingface_hub.file_download import repo_folder_name

        folder = repo_folder_name(repo_id=repo, repo_type="model")
        repo_dir = cache_dir / folder
        blob = repo_dir / "blobs" / etag
        return cls(
            repo_dir=repo_dir,
            blob=blob,
            partial=blob.with_name(etag + PARTIAL_SUFFIX),
            pointer=repo_dir / "snapshots" / commit / name,
            lock=cache_dir / ".locks" / folder / f"{etag}.lock",
        )


def place(paths: CachePaths, revision: str | None, commit: str) -> Path:
    """Move the finished partial file to its blob and link the snapshot entry; returns the entry.

    Where symlinks are not allowed (Windows without developer mode), the file itself goes to the
    snapshot path, as huggingface_hub does in that case.
    """
    from huggingface_hub.file_download import are_symlinks_supported

    paths.blob.parent.mkdir(parents=True, exist_ok=True)
    if are_symlinks_supported(paths.repo_dir.parent):
        os.replace(paths.partial, paths.blob)
        return link(paths, revision, commit)
    _clear(paths.pointer)
    shutil.move(str(paths.partial), str(paths.pointer))
    _write_ref(paths, revision, commit)
    return paths.pointer


def link(paths: CachePaths, revision: str | None, commit: str) -> Path:
    """Point the snapshot entry at an existing blob (one another tool may have downloaded)."""
    from huggingface_hub.file_download import are_symlinks_supported

    _clear(paths.pointer)
    if are_symlinks_supported(paths.repo_dir.parent):
        os.symlink(os.path.relpath(paths.blob, paths.pointer.parent), paths.pointer)
    else:
        shutil.copyfile(paths.blob, paths.pointer)
    _write_ref(paths, revision, commit)
    return paths.pointer


def _clear(pointer: Path) -> None:
    pointer.parent.mkdir(parents=True, exist_ok=True)
    if pointer.is_symlink() or pointer.exists():
        pointer.unlink()


def _write_ref(paths: CachePaths, revision: str | None, commit: str) -> None:
    ref = revision or "main"
    if not _COMMIT_RE.match(ref):
        ref_file = paths.repo_dir / "refs" / ref
        ref_file.parent.mkdir(parents=True, exist_ok=True)
        ref_file.write_text(commit)


def cached_file(paths: CachePaths) -> Path | None:
    """The complete file if this commit's entry is already in the cache (ours or another tool's)."""
    if paths.pointer.exists():
        return paths.pointer
    return None


def cached_blob(paths: CachePaths) -> Path | None:
    """The blob if the same content is cached under another commit (same ETag, no entry here)."""
    return paths.blob if paths.blob.is_file() else None
