"""load_schema and row_count on real, awkward files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sqale_desktop.core.db import load_schema, open_readonly, row_count
from sqale_desktop.core.db.introspect import cached_schema
from tests.helpers import shared_data


def test_chinook_tables_columns_and_keys(chinook: Path) -> None:
    with open_readonly(chinook) as db:
        schema = load_schema(db)
        track = schema.find("track")
        assert track is not None and track.name == "Track"
        assert track.kind == "table"
        assert [c.name for c in track.columns][:3] == ["TrackId", "Name", "AlbumId"]
        assert track.primary_key == ["TrackId"]
        assert {(k.columns, k.ref_table) for k in track.foreign_keys} == {
            (("AlbumId",), "Album"),
            (("GenreId",), "Genre"),
            (("MediaTypeId",), "MediaType"),
        }
        assert row_count(db, "Track") == 3503
        assert row_count(db, "artist") == 275


def test_views_and_triggers_file(sakila: Path) -> None:
    with open_readonly(sakila) as db:
        schema = load_schema(db)
    kinds = {t.name: t.kind for t in schema.tables}
    assert kinds["customer_list"] == "view"
    assert kinds["film"] == "table"
    assert all(t.error is None for t in schema.tables)


def test_without_rowid_and_composite_keys() -> None:
    with open_readonly(shared_data("awkward/proj_9.1.1.db")) as db:
        schema = load_schema(db)
    assert any(t.without_rowid for t in schema.tables)
    composite = [k for t in schema.tables for k in t.foreign_keys if len(k.columns) > 1]
    assert len(composite) >= 40
    assert all(len(k.columns) == len(k.ref_columns) for k in composite)


def test_missing_modules_are_reported_per_object() -> None:
    with open_readonly(shared_data("awkward/datasette_spatialite.sqlite")) as db:
        schema = load_schema(db)
    broken = {t.name: t.error for t in schema.tables if t.error}
    assert broken == {
        "SpatialIndex": "no such module: VirtualSpatialIndex",
        "ElementaryGeometries": "no such module: VirtualElementary",
    }
    assert sum(1 for t in schema.tables if t.error is None and t.columns) > 20


def test_fts_shadow_tables_are_hidden_from_the_visible_list() -> None:
    with open_readonly(shared_data("awkward/sakila_fts5.sqlite")) as db:
        schema = load_schema(db)
    shadow = [t.name for t in schema.tables if t.kind == "shadow"]
    assert shadow and all(name.startswith("actor_fts_") for name in shadow)
    visible = [t.name for t in schema.visible()]
    assert "actor_fts" in visible
    assert not set(shadow) & set(visible)
    assert "sqlite_sequence" not in visible


def test_big_schema_with_odd_identifiers() -> None:
    with open_readonly(shared_data("awkward/ios__powerlog_84E2141B.PLSQL.sqlite")) as db:
        schema = load_schema(db)
    assert len(schema.visible()) == 367
    assert all(t.error is None for t in schema.tables)


def test_broken_view_is_reported_and_the_rest_still_described(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "broken.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE kept (id INTEGER PRIMARY KEY, label TEXT) WITHOUT ROWID;
        CREATE TABLE gone (id INTEGER PRIMARY KEY);
        CREATE VIEW orphan AS SELECT * FROM gone;
        CREATE TRIGGER kept_audit AFTER INSERT ON kept BEGIN SELECT 1; END;
        DROP TABLE gone;
        """
    )
    conn.close()
    with open_readonly(path) as db:
        schema = load_schema(db)
        orphan = schema.find("orphan")
        kept = schema.find("KEPT")
        assert orphan is not None and orphan.error == "no such table: main.gone"
        assert kept is not None and kept.error is None and kept.without_rowid
        assert [c.name for c in kept.columns] == ["id", "label"]
        assert row_count(db, "kept") == 0


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_the_cached_schema_is_read_again_after_another_program_changes_it(
    tmp_path: Path, journal: str
) -> None:
    # In rollback-journal mode the cookie is read from the file's header, in WAL mode from SQLite.
    path = tmp_path / f"{journal}.sqlite"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute(f"PRAGMA journal_mode = {journal}")
    writer.execute("CREATE TABLE a (x)")
    with open_readonly(path) as db:
        assert [t.name for t in cached_schema(db).tables] == ["a"]
        writer.execute("CREATE TABLE b (y)")
        assert [t.name for t in cached_schema(db).tables] == ["a", "b"]
        assert cached_schema(db) is cached_schema(db)  # unchanged: the same reading
    writer.close()
