"""How far one import may go, and from what size its fast paths pay: one value for the whole build.

The parent makes it from the settings (:meth:`ImportLimits.from_settings`) and hands it to the
build, across the pipe to the importer child with the rest of its plan; the readers, the fast paths
and the writer read their figures from it.  A test states the limits it means (a fast path taken
for a small file, small blocks) by passing its own value, never by patching a module's constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqale_desktop.core.settings import Settings

MB = 1024 * 1024


@dataclass(frozen=True)
class ImportLimits:
    """``write_bytes``: the most one file of an import may grow to (the ``import_write_limit_mb``
    setting: a 454 KB Parquet file of run-length encoded rows wrote 4 GB before this bound).

    The rest are the tuning figures of the readers: ``fast_text_bytes`` (smaller delimited files
    take the general path: they import in well under a second), ``fast_typed_rows`` (the same for
    Parquet and DuckDB tables), ``guess_bytes`` (the fast text path guesses the types from this
    much before it writes a row), ``block_bytes`` (pyarrow's read block, one record batch of about
    this much text), ``transcode_bytes`` (a block of a file in another codec, written again as
    UTF-8), ``json_chunk_chars`` (what a JSON array is read by) and ``batch_rows`` (the rows of a
    text, JSON or sheet batch).
    """

    write_bytes: int = 8192 * MB
    fast_text_bytes: int = 4 * MB
    fast_typed_rows: int = 50_000
    guess_bytes: int = 8 * MB
    block_bytes: int = 1 * MB
    transcode_bytes: int = 4 * MB
    json_chunk_chars: int = 1 * MB
    batch_rows: int = 20_000

    @classmethod
    def from_settings(cls, settings: Settings) -> ImportLimits:
        return cls(write_bytes=settings.import_write_limit_mb * MB)

    @classmethod
    def saved(cls) -> ImportLimits:
        """The limits of the saved settings (what an import that was given none uses)."""
        from sqale_desktop.core import settings as settings_mod

        return cls.from_settings(settings_mod.load().settings)
