"""What an import made, as every face shows it: the database, its tables, its notes and keys.

The parent builds it from the cache's manifest (a reused import) or from the importer child's
answer; the child builds it from the tables it wrote.  One type for all three.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TableSummary:
    name: str
    source: str
    rows: int
    columns: int


@dataclass
class ImportResult:
    """What an import made: the database, where it came from, and what a person should know."""

    db_path: Path
    source: Path
    summary: str
    tables: list[TableSummary] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    foreign_keys: list[str] = field(default_factory=list)
    reused: bool = False

    def details(self) -> str:
        """Several lines for the tab's details: the summary, the tables, the keys, the notes."""
        lines = [self.summary, f"Imported copy: {self.db_path}"]
        lines += [f"• {t.name}: {t.rows:,} rows × {t.columns} columns (from {t.source})" for t in self.tables]
        if self.foreign_keys:
            lines.append("Foreign keys inferred:")
            lines += [f"• {fk}" for fk in self.foreign_keys]
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)
