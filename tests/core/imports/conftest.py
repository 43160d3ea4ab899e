"""Fixtures for the import tests: the real data files and a check that a source never changes."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import fingerprint, shared_data


@pytest.fixture(autouse=True)
def build_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The readers' tests patch the readers here, so their imports build in this process; the
    child that the app runs every import in has its own tests (test_import_child.py)."""
    from sqale_desktop.core.imports import isolated

    monkeypatch.setattr(isolated, "IN_CHILD", False)


@pytest.fixture
def files() -> Path:
    return shared_data("files")


@pytest.fixture
def rows() -> Any:
    """``rows(db_path, sql)``: the rows a query gives on an imported database (closed after)."""
    opened: list[sqlite3.Connection] = []

    def run(db_path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        opened.append(conn)
        return list(conn.execute(sql, params))

    yield run
    for conn in opened:
        conn.close()


@pytest.fixture
def untouched(files: Path) -> Iterator[None]:
    """Every data file has the same bytes and mtime after the test as before it."""
    before = {p: fingerprint(p) for p in files.rglob("*") if p.is_file()}
    yield
    after = {p: fingerprint(p) for p in files.rglob("*") if p.is_file()}
    assert after == before


# The cache's own bookkeeping in a source's folder: the build lock (core/imports/build_lock.py) and
# the cache bound's stamps (core/imports/cache_bound.py), which hold no byte of any source.
BOOKKEEPING = frozenset({".lock", ".last-used", ".in-use"})


@pytest.fixture
def left_in_cache() -> Any:
    """``left_in_cache()``: the files an import left in the cache, its bookkeeping aside."""
    from sqale_desktop.core import paths

    def files() -> list[Path]:
        return [p for p in paths.cache_dir().rglob("*") if p.is_file() and p.name not in BOOKKEEPING]

    return files
