"""What one build of an import is to do: one value, made once by the parent (``core.imports``),
sent to the importer child (:mod:`.isolated`) and read by the build (:mod:`.assembly`).

Its fields were a parameter list both builds repeated and the child's message spelled out again
by hand; a field added here travels the whole way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqale_desktop.core.imports.limits import ImportLimits


@dataclass(frozen=True)
class ImportPlan:
    """Import ``source`` (of ``kind``: a :class:`.sources.Source`'s, or ``folder``), whose files
    are ``members``, into ``folder``'s ``.building`` as ``db_path``'s name, within ``limits``;
    ``skipped``: notes on a folder's files passed over when it was listed."""

    source: Path
    kind: str
    members: tuple[Path, ...]
    skipped: tuple[str, ...]
    folder: Path
    db_path: Path
    limits: ImportLimits

    def to_message(self) -> dict[str, Any]:
        """The plan as the child's message carries it (plain values, absolute paths: the child's
        working folder is not the parent's concern)."""
        return {
            "source": str(self.source.absolute()),
            "kind": self.kind,
            "members": [str(m.absolute()) for m in self.members],
            "skipped": list(self.skipped),
            "folder": str(self.folder.absolute()),
            "db_path": str(self.db_path.absolute()),
            "limits": dataclasses.asdict(self.limits),
        }

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> ImportPlan:
        """The plan :meth:`to_message` wrote (keys it does not know are left for the caller)."""
        return cls(
            source=Path(data["source"]),
            kind=str(data["kind"]),
            members=tuple(Path(m) for m in data["members"]),
            skipped=tuple(str(n) for n in data["skipped"]),
            folder=Path(data["folder"]),
            db_path=Path(data["db_path"]),
            limits=ImportLimits(**data["limits"]),
        )
