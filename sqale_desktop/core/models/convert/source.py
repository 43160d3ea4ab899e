"""Where the checkpoint comes from: a local folder, or a hub repository fetched into the hub cache.

The hub download goes through huggingface_hub's ``snapshot_download`` (resumable, cached, shared
with other tools) pointed at the same endpoint and token as the rest of the app, with its errors
re-worded by ``hub.translated_errors``.  Only the files the converter reads are fetched.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sqale_desktop.core.models import hub
from sqale_desktop.core.models.convert.errors import ConversionCancelled

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


def remote_checkpoint_size(repo: str, revision: str | None = None, token: str | None = None) -> int:
    """Bytes the download will take (the files matching CHECKPOINT_PATTERNS), from the hub's listing."""
    from fnmatch import fnmatch

    with hub.translated_errors(f"the checkpoint {repo}"):
        info = hub.api(token).model_info(repo, revision=revision, files_metadata=True)
    return sum(
        int(s.size or 0)
        for s in info.siblings or []
        if any(fnmatch(s.rfilename, pattern) for pattern in CHECKPOINT_PATTERNS)
    )


def fetch_checkpoint(
    repo: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    cache_dir: Path | None = None,
    cancel: threading.Event | None = None,
) -> Path:
    """Download (or find in the hub cache) the checkpoint files; returns the snapshot folder."""
    from huggingface_hub import snapshot_download

    if cancel is not None and cancel.is_set():
        raise ConversionCancelled("conversion cancelled")
    with hub.translated_errors(f"the checkpoint {repo}"):
        folder = snapshot_download(
            repo,
            revision=revision,
            token=token,
            cache_dir=cache_dir,
            endpoint=hub.endpoint(),
            allow_patterns=CHECKPOINT_PATTERNS,
            library_name=hub.LIBRARY_NAME,
        )
    if cancel is not None and cancel.is_set():
        raise ConversionCancelled("conversion cancelled")
    return Path(folder)
