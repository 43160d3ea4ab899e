"""Where the checkpoint comes from: a local folder, or a hub repository fetched into the hub cache.

The hub download lists the repository once (sizes, for the disk check, and the commit, so every
file comes from the same revision), then fetches each file with huggingface_hub's
``hf_hub_download`` into the standard hub cache (shared with other tools), with the app's endpoint
and token and its errors re-worded by ``hub.translated_errors``.  Only the files the converter
reads are fetched; the cancel flag is checked between files.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from sqale_desktop.core.models import hub
from sqale_desktop.core.models.convert.errors import ConversionCancelled, UnsupportedCheckpoint

CHECKPOINT_PATTERNS = [
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
    "*.safetensors",
    "model.safetensors.index.json",
    "sqale_agent.py",
]
# (bytes done, bytes in total, file now downloading)
FileProgress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class RemoteCheckpoint:
    """The files of a checkpoint on the hub, pinned to one commit."""

    repo: str
    commit: str
    files: dict[str, int]

    @property
    def size(self) -> int:
        return sum(self.files.values())


def remote_checkpoint(repo: str, revision: str | None = None, token: str | None = None) -> RemoteCheckpoint:
    """List the files the converter needs (CHECKPOINT_PATTERNS) with their sizes, from the hub."""
    with hub.translated_errors(f"the checkpoint {repo}"):
        info = hub.api(token).model_info(repo, revision=revision, files_metadata=True)
    files = {
        s.rfilename: int(s.size or 0)
        for s in info.siblings or []
        if "/" not in s.rfilename and any(fnmatch(s.rfilename, p) for p in CHECKPOINT_PATTERNS)
    }
    if "config.json" not in files:
        raise UnsupportedCheckpoint(f"{repo} has no config.json; is it a safetensors checkpoint?")
    return RemoteCheckpoint(repo, str(info.sha or revision or "main"), files)


def fetch_checkpoint(
    remote: RemoteCheckpoint,
    *,
    token: str | None = None,
    cache_dir: Path | None = None,
    cancel: threading.Event | None = None,
    progress: FileProgress | None = None,
) -> Path:
    """Download (or find in the hub cache) each file, pinned to the listed commit; returns the
    snapshot folder.  Cancel is honoured between files; a cancelled file is resumed next time
    by huggingface_hub's own cache logic."""
    from huggingface_hub import hf_hub_download

    folder: Path | None = None
    done = 0
    shards: set[str] | None = None  # the shards the index lists, once it is here
    # Small files (config, tokenizer, index) first: a checkpoint that is not what we expect fails
    # before the big download, and shards the index does not list are never fetched.
    for name, size in sorted(
        remote.files.items(), key=lambda kv: (kv[0].endswith(".safetensors"), kv[1], kv[0])
    ):
        if shards is not None and name.endswith(".safetensors") and name not in shards:
            continue
        if cancel is not None and cancel.is_set():
            raise ConversionCancelled("conversion cancelled")
        if progress is not None:
            progress(done, remote.size, name)
        with hub.translated_errors(f"{remote.repo}/{name}"):
            path = hf_hub_download(
                remote.repo,
                name,
                revision=remote.commit,
                token=token,
                cache_dir=cache_dir,
                endpoint=hub.endpoint(),
                library_name=hub.LIBRARY_NAME,
            )
        folder = Path(path).parent
        done += size
        if name == "model.safetensors.index.json":
            shards = set(json.loads(Path(path).read_text(encoding="utf-8")).get("weight_map", {}).values())
    if progress is not None:
        progress(done, remote.size, "")
    assert folder is not None  # remote_checkpoint guarantees config.json
    return folder
