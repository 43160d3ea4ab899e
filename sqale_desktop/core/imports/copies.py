"""Which file an imported copy in the cache was made from.

The copy of a CSV, workbook or folder lives in the import cache with a manifest that names its
source (:mod:`sqale_desktop.core.imports`).  What was kept under the copy's path, by an older
version's conversations for instance, is about that source: this finds it, so that a person is
shown ``orders.csv`` (and reopening it imports the source again when it changed), never
``orders.csv.sqlite`` cut off from where it came from.
"""

from __future__ import annotations

import json
from pathlib import Path


def source_of_copy(db_path: Path | str) -> Path | None:
    """The source of the import whose copy is ``db_path``; None when ``db_path`` is no copy in
    the cache (a database the user opened) or its manifest cannot be read."""
    from sqale_desktop.core.imports.cache_bound import copy_folder

    try:
        folder = copy_folder(Path(db_path))
        if folder is None:
            return None
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    source = manifest.get("source") if isinstance(manifest, dict) else None
    return Path(source) if isinstance(source, str) and source else None
