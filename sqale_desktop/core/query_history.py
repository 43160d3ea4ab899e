"""The query history: statements the user ran by hand, as the history panel lists and searches them.

They are stored with the conversations (``core.history``: ``rerun`` entries, with their duration
since schema version 2), so they survive restarts and go when the conversation is deleted; this
module turns entries into runs and says which runs a search matches, without Qt.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqale_desktop.core.history import Entry

CANCELLED = "the query was cancelled"
"""The error stored for a run the user stopped (Stop, Esc).  The same words the database layer's
``QueryInterrupted`` carries, so runs stopped before this constant existed read "cancelled" too."""


@dataclass(frozen=True)
class QueryRun:
    """One statement the user ran: when, how long to its first rows, how many rows, on which file."""

    sql: str
    ran_at: datetime
    database: str  # the database file's name (the panel lists one database's runs)
    duration_ms: int | None = None
    row_count: int | None = None  # None: not known (more rows than the first page, or an error)
    error: str | None = None
    entry_id: int | None = None  # the history entry, once stored

    @property
    def cancelled(self) -> bool:
        """The user stopped it: not an error, nothing wrong with the statement."""
        return self.error == CANCELLED

    @property
    def status(self) -> str:
        """How the run ended, in a few words for the panel's Rows column."""
        if self.cancelled:
            return "cancelled"
        if self.error:
            return "error"
        if self.row_count is None:
            return "more than a page"
        return f"{self.row_count:,} row" + ("" if self.row_count == 1 else "s")

    def matches(self, text: str) -> bool:
        """A search: every word of ``text`` occurs (any case) in the SQL, the error or the file name."""
        haystack = "\n".join((self.sql, self.error or "", self.database)).casefold()
        return all(word in haystack for word in text.casefold().split())


def runs_from_entries(entries: Iterable[Entry], database: Path | str) -> list[QueryRun]:
    """The hand-run statements among a conversation's entries, oldest first."""
    name = Path(database).name
    return [
        QueryRun(
            sql=entry.sql or "",
            ran_at=entry.created_at,
            database=name,
            duration_ms=entry.duration_ms,
            row_count=entry.row_count,
            error=entry.error,
            entry_id=entry.id,
        )
        for entry in entries
        if entry.kind == "rerun"
    ]


def search(runs: Iterable[QueryRun], text: str) -> list[QueryRun]:
    return [run for run in runs if run.matches(text)]
