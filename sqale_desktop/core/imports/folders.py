"""Which files of a folder an import reads, and the ones it passes over with a note.

A folder is imported as one database of its data files.  One bad file must not cost the others:
an empty file, one that cannot be opened, or a link that leads out of the folder is skipped with
a note (a file whose content is refused is skipped the same way, when it is read, by the import).
A link is followed only when its target is inside the folder: a link to ``~/.ssh`` or ``/proc``
dropped in a shared folder is never read.  The folder is listed once (``os.scandir``): 10,000
files cost a listing, not 10,000 walks.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sqale_desktop.core.imports.progress import printable


def members(folder: Path, kind_of: Callable[[Path], str | None]) -> tuple[list[Path], list[str]]:
    """The data files of ``folder`` to import, in name order, and a note for each one skipped."""
    inside = folder.resolve()
    kept: list[Path] = []
    notes: list[str] = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return [], []
    for entry in entries:
        path = Path(entry.path)
        try:
            if entry.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(inside):
                    if kind_of(target) is not None or not target.exists():
                        notes.append(f"{printable(entry.name)} skipped: a link to a file outside the folder")
                    continue
            if not entry.is_file() or kind_of(path) is None:
                continue  # subfolders and other files are not data files of this folder
            size = entry.stat().st_size
        except OSError as exc:
            notes.append(f"{printable(entry.name)} skipped: {exc.strerror or exc}")
            continue
        if size == 0:
            notes.append(f"{printable(entry.name)} skipped: it is empty")
            continue
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            notes.append(f"{printable(entry.name)} skipped: it cannot be read ({exc.strerror or exc})")
            continue
        kept.append(path)
    return kept, notes
