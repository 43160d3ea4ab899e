"""How far an import is, how fast it goes, and the errors it can end with.

The window's worker and the CLI receive the same :class:`ImportProgress` (rows, bytes, MB/s, an
estimate of the time left) through one callback; both stop an import by setting a
``threading.Event`` that the import checks between batches (the style's cancellation rule).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.units import format_bytes

ProgressFn = Callable[["ImportProgress"], None]
REPORT_INTERVAL_S = 0.1  # at most one progress report this often (read when a meter is made)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` that encodes as UTF-8: a file name that is not UTF-8 reaches Python with its bytes
    as lone surrogates, which the terminal, the window, SQLite and the manifest all refuse; each
    such character becomes U+FFFD (the name is for people; the path itself is kept as it is)."""
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text


class ImportFailed(KnownError):
    """A source that cannot be imported; the message says which file and why (made printable)."""

    def __init__(self, message: str = "", *args: object) -> None:
        super().__init__(printable(str(message)), *args)


FREE_WHEN_LIMITED = 64 * 1024 * 1024


def limit_not_disk(where: Path) -> bool:
    """Whether SQLite's "database or disk is full" at ``where`` was the size limit (every file of
    an import is opened with ``max_page_count`` at the import's ``write_bytes`` limit), not the disk: the
    disk still has room.  (SQLite says the same words for both, and once the statement has failed
    its page count is the one before it.)"""
    import shutil

    try:
        return shutil.disk_usage(where).free >= FREE_WHEN_LIMITED
    except OSError:
        return False


def write_limit_error(source: str, limit: int) -> ImportFailed:
    """The message for an import that reached its ``write_bytes`` limit (:mod:`.limits`)."""
    return ImportFailed(
        f"{source} expands to more than {limit // 2**20:,} MB once imported, the import size limit "
        "(the import_write_limit_mb setting); nothing was kept. A small compressed file can hold "
        "that much: raise the limit if the file is what you expect."
    )


class ImportCancelled(ImportFailed):
    """The import was stopped (Stop, Ctrl+C); nothing of it is kept."""


@dataclass(frozen=True)
class ImportProgress:
    """One report: ``rows`` imported so far of ``source``, ``bytes_done`` of ``bytes_total`` read."""

    source: str
    rows: int
    bytes_done: int
    bytes_total: int
    elapsed_s: float

    @property
    def mb_per_s(self) -> float:
        return self.bytes_done / 1e6 / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the speed so far; None before anything was read."""
        if self.bytes_done <= 0 or self.bytes_total <= 0 or self.elapsed_s <= 0:
            return None
        return max(0.0, (self.bytes_total - self.bytes_done) * self.elapsed_s / self.bytes_done)

    @property
    def fraction(self) -> float:
        return min(1.0, self.bytes_done / self.bytes_total) if self.bytes_total > 0 else 0.0

    def line(self) -> str:
        """``sales.csv: 120,000 rows, 12 MB of 40 MB (60 MB/s, about 1 s left)``"""
        text = f"Importing {self.source}: {self.rows:,} rows"
        if self.bytes_total > 0:
            text += f", {format_bytes(self.bytes_done)} of {format_bytes(self.bytes_total)}"
        if self.elapsed_s > 0.5:
            text += f" ({self.mb_per_s:.0f} MB/s"
            eta = self.eta_s
            text += f", about {eta:.0f} s left)" if eta is not None else ")"
        return text


class Meter:
    """Counts rows and bytes for one import, reports at most every :data:`REPORT_INTERVAL_S` and raises
    :class:`ImportCancelled` once ``cancel`` is set (checked on every count)."""

    def __init__(
        self,
        total_bytes: int,
        progress: ProgressFn | None,
        cancel: threading.Event | None,
    ) -> None:
        self.total_bytes = total_bytes
        self.rows = 0
        self.source = ""
        self._done_before = 0  # bytes of the files already imported (a folder)
        self._rows_before = 0  # rows of the files already imported
        self._bytes = 0
        self._progress = progress
        self._cancel = cancel
        self._interval = REPORT_INTERVAL_S
        self._start = time.monotonic()
        self._last = 0.0

    def start_file(self, name: str) -> None:
        self._done_before += self._bytes
        self._rows_before = self.rows
        self._bytes = 0
        self.source = printable(name)
        self.check()

    def rewind(self) -> None:
        """The current file is read again from its start: its rows and bytes so far stop counting."""
        self.rows = self._rows_before
        self._bytes = 0

    def count(self, rows: int, bytes_read: int | None = None) -> None:
        """``rows`` more rows imported; ``bytes_read`` of the current file read so far."""
        self.rows += rows
        if bytes_read is not None:
            self._bytes = bytes_read
        self.check()
        now = time.monotonic()
        if self._progress is not None and now - self._last >= self._interval:
            self._last = now
            self._progress(self.snapshot())

    def finish(self) -> None:
        """Every file is read: report that now, whatever the interval, so the last report a person
        sees (and the bar) is the whole source, not the batch before the throttle's last."""
        self.check()
        if self._progress is not None:
            self._last = time.monotonic()
            self._progress(self.snapshot())

    def check(self) -> None:
        if self._cancel is not None and self._cancel.is_set():
            raise ImportCancelled(f"Import of {self.source or 'the file'} stopped; nothing was kept.")

    def snapshot(self) -> ImportProgress:
        return ImportProgress(
            self.source,
            self.rows,
            self._done_before + self._bytes,
            self.total_bytes,
            time.monotonic() - self._start,
        )
