"""Parquet files and DuckDB tables through the ADBC writer make the database the general path
makes: every real file in ``files/parquet`` and ``files/duckdb`` is imported both ways and the two
databases compared (schema, keys, every value with its storage class, the notes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core import imports
from sqale_desktop.core.imports import ImportLimits, fast_typed, import_source
from tests.core.imports.test_fast_text import dump
from tests.core.imports.test_real_files import PARQUETS

pytestmark = pytest.mark.usefixtures("untouched")


def both_ways(path: Path, monkeypatch: pytest.MonkeyPatch, home: Path) -> tuple[Any, Any, int]:
    """(general path's import, fast path's import, how many tables the fast path wrote)."""
    monkeypatch.setenv("SQALE_DESKTOP_HOME", str(home / "general"))
    general = import_source(path, limits=ImportLimits(fast_typed_rows=1 << 62))
    general_dump = dump(general.db_path), general.summary, general.notes, general.foreign_keys
    monkeypatch.setenv("SQALE_DESKTOP_HOME", str(home / "fast"))
    written: list[str] = []
    real_write = fast_typed.write_table

    def spy(*args: Any, **kwargs: Any) -> Any:
        table = real_write(*args, **kwargs)
        written.append(table.source)
        return table

    monkeypatch.setattr(fast_typed, "write_table", spy)
    fast = import_source(path, limits=ImportLimits(fast_typed_rows=0))
    return general_dump, (dump(fast.db_path), fast.summary, fast.notes, fast.foreign_keys), len(written)


@pytest.mark.parametrize("name", [*PARQUETS, "duckdb/jaffle_shop.duckdb", "duckdb/wal_test_092.db"])
def test_a_real_file_imports_the_same_both_ways(
    files: Path, name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    try:
        general, fast, written = both_ways(files / name, monkeypatch, tmp_path)
    except imports.ImportFailed as exc:
        pytest.fail(f"{name}: {exc}")
    assert fast == general
    assert written >= 1  # the fast path took at least one table (others may need the general one)


def test_the_fast_path_writes_most_real_tables(
    files: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The check above cannot pass by the fast path declining everything: it writes the tables of
    all the DuckDB files and most Parquet files."""
    taken = 0
    for i, path in enumerate(sorted((files / "parquet").glob("*.parquet"))):
        if "bad_PARQUET" in path.name:
            continue
        _general, _fast, written = both_ways(path, monkeypatch, tmp_path / str(i))
        taken += written
    assert taken >= 6
