"""The hostile-SQL suite: every write form is refused, and no database file changes at all."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from sqale_desktop.core.db import QueryDenied, ReadOnlyDatabase, open_readonly
from tests.helpers import shared_data

HOSTILE = [
    # plain writes
    "INSERT INTO Artist VALUES (999, 'x')",
    "INSERT INTO Artist SELECT * FROM Artist",
    "INSERT INTO Artist DEFAULT VALUES",
    "INSERT OR REPLACE INTO Artist VALUES (1, 'x')",
    "INSERT INTO Artist VALUES (1001, 'a') ON CONFLICT DO NOTHING",
    "INSERT INTO Artist VALUES (1000, 'x') RETURNING *",
    "REPLACE INTO Artist VALUES (1, 'x')",
    "UPDATE Artist SET Name = 'x'",
    "UPDATE OR IGNORE Artist SET Name = 'x' WHERE ArtistId = 1",
    "UPDATE Artist SET Name = 'x' RETURNING *",
    "DELETE FROM Artist",
    "DELETE FROM Artist WHERE ArtistId = 1 RETURNING *",
    "insert into \"Artist\" values (3000, 'lower case')",
    "InSeRt InTo Artist VALUES (3001, 'mixed case')",
    "UPDATE sqlite_master SET sql = 'x'",
    "DELETE FROM sqlite_sequence",
    # CTE tricks
    "WITH x AS (SELECT 1) INSERT INTO Artist SELECT 999, 'x' FROM x",
    "WITH x AS (SELECT 1) UPDATE Artist SET Name = 'y'",
    "WITH x AS (SELECT 1) DELETE FROM Artist",
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r WHERE x < 3) "
    "INSERT INTO Artist SELECT x + 5000, 'r' FROM r",
    # DDL, also temp objects
    "CREATE TABLE t (a)",
    "CREATE TABLE IF NOT EXISTS t (a)",
    "CREATE TABLE t AS SELECT * FROM Artist",
    "CREATE TEMP TABLE t (a)",
    "CREATE TEMPORARY TABLE t AS SELECT 1",
    "CREATE TABLE temp.t (a)",
    "CREATE TEMP VIEW v AS SELECT 1",
    "CREATE VIEW v AS SELECT 1",
    "CREATE INDEX i ON Artist (Name)",
    "CREATE UNIQUE INDEX i ON Artist (Name)",
    "CREATE TEMP TRIGGER tr AFTER INSERT ON Artist BEGIN SELECT 1; END",
    "CREATE TRIGGER tr AFTER INSERT ON Artist BEGIN DELETE FROM Album; END",
    "CREATE VIRTUAL TABLE f USING fts5(a)",
    "CREATE VIRTUAL TABLE temp.f USING fts4(a)",
    "DROP TABLE Artist",
    "DROP TABLE IF EXISTS Artist",
    "DROP VIEW IF EXISTS v",
    "DROP INDEX IFK_AlbumArtistId",
    "DROP TRIGGER IF EXISTS tr",
    "ALTER TABLE Artist ADD COLUMN x",
    "ALTER TABLE Artist RENAME TO Artist2",
    "ALTER TABLE Artist RENAME COLUMN Name TO N",
    "ALTER TABLE Artist DROP COLUMN Name",
    # ATTACH / DETACH / VACUUM
    "ATTACH DATABASE '{tmp}/evil.db' AS evil",
    "ATTACH ':memory:' AS m",
    "ATTACH 'file:evil?mode=memory' AS m",
    "DETACH DATABASE main",
    "VACUUM",
    "VACUUM main",
    "VACUUM INTO '{tmp}/copy.db'",
    "VACUUM main INTO '{tmp}/copy2.db'",
    "REINDEX",
    "REINDEX Artist",
    "ANALYZE",
    "ANALYZE Artist",
    # writable pragmas
    "PRAGMA journal_mode = WAL",
    "PRAGMA journal_mode = DELETE",
    "PRAGMA user_version = 7",
    "PRAGMA main.user_version = 3",
    "PRAGMA application_id = 1",
    "PRAGMA schema_version = 1",
    "PRAGMA writable_schema = ON",
    "PRAGMA query_only = 0",
    "PRAGMA trusted_schema = ON",
    "PRAGMA foreign_keys = ON",
    "PRAGMA page_size = 1024",
    "PRAGMA auto_vacuum = FULL",
    "PRAGMA incremental_vacuum",
    "PRAGMA wal_checkpoint(TRUNCATE)",
    "PRAGMA optimize",
    "PRAGMA secure_delete = ON",
    "PRAGMA locking_mode = EXCLUSIVE",
    "PRAGMA cache_size = 10",
    "PRAGMA mmap_size = 1000000",
    "PRAGMA temp_store_directory = '/tmp'",
    # extensions and unsafe functions
    "SELECT load_extension('{tmp}/evil.so')",
    "SELECT load_extension('mod_spatialite')",
    "SELECT fts3_tokenizer('simple')",
    # statement stacking, comments, whitespace, EXPLAIN
    "SELECT 1; DROP TABLE Artist",
    "SELECT 1; INSERT INTO Artist VALUES (1, 'x')",
    "SELECT * FROM Artist; -- x\n DELETE FROM Artist",
    "SELECT 1 /* ; */; ATTACH 'x' AS y",
    "/* comment */ INSERT INTO Artist VALUES (2000, 'c')",
    "-- comment\nDELETE FROM Artist",
    "  \n\t UPDATE Artist SET Name = 'ws'",
    "EXPLAIN INSERT INTO Artist VALUES (1, 'x')",
    "EXPLAIN QUERY PLAN DELETE FROM Artist",
    # transactions
    "BEGIN",
    "BEGIN IMMEDIATE",
    "BEGIN EXCLUSIVE",
    "COMMIT",
    "END",
    "ROLLBACK",
    "SAVEPOINT s",
    "RELEASE s",
]


def _fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def _targets(chinook: Path, tmp_path: Path) -> list[Path]:
    """A copy in a writable folder (where a write could succeed) and the shared originals."""
    copy_dir = tmp_path / "writable"
    copy_dir.mkdir()
    copy = copy_dir / "chinook.sqlite"
    shutil.copyfile(chinook, copy)
    return [copy, chinook]


def test_suite_is_big_enough() -> None:
    assert len(HOSTILE) >= 60
    assert len(set(HOSTILE)) == len(HOSTILE)


def test_every_hostile_statement_is_refused_and_no_file_changes(chinook: Path, tmp_path: Path) -> None:
    targets = _targets(chinook, tmp_path)
    before = {path: _fingerprint(path) for path in targets}
    folder_before = sorted(p.name for p in targets[0].parent.iterdir())
    accepted: list[str] = []
    for path in targets:
        with open_readonly(path) as db:
            for template in HOSTILE:
                sql = template.replace("{tmp}", str(tmp_path))
                try:
                    db.execute(sql)
                except QueryDenied as exc:
                    assert str(exc).startswith("read-only: "), (sql, str(exc))
                else:
                    accepted.append(sql)
            assert db.execute("SELECT count(*) FROM Artist").rows[0][0] == 275  # still usable
    assert accepted == []
    assert {path: _fingerprint(path) for path in targets} == before
    assert sorted(p.name for p in targets[0].parent.iterdir()) == folder_before
    assert not list(tmp_path.glob("copy*.db")) and not (tmp_path / "evil.db").exists()


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("INSERT INTO Artist VALUES (999, 'x')", "read-only: INSERT is not allowed"),
        ("REPLACE INTO Artist VALUES (1, 'x')", "read-only: REPLACE is not allowed"),
        ("UPDATE Artist SET Name = 'x'", "read-only: UPDATE is not allowed"),
        ("DELETE FROM Artist", "read-only: DELETE is not allowed"),
        ("CREATE TEMP TABLE t (a)", "read-only: CREATE TEMP TABLE is not allowed"),
        ("DROP TABLE Artist", "read-only: DROP TABLE is not allowed"),
        ("ATTACH ':memory:' AS m", "read-only: ATTACH is not allowed"),
        ("VACUUM INTO '/tmp/x.db'", "read-only: VACUUM INTO is not allowed"),
        ("VACUUM", "read-only: VACUUM is not allowed"),
        ("PRAGMA journal_mode = WAL", "read-only: setting PRAGMA journal_mode is not allowed"),
        ("PRAGMA optimize", "read-only: PRAGMA optimize is not allowed"),
        ("SELECT load_extension('x')", "read-only: load_extension() is not allowed"),
        ("SELECT 1; SELECT 2", "read-only: only one statement at a time is allowed"),
    ],
)
def test_refusals_say_what_was_refused(chinook: Path, sql: str, message: str) -> None:
    with open_readonly(chinook) as db, pytest.raises(QueryDenied) as info:
        db.execute(sql)
    assert str(info.value) == message


ALLOWED = [
    "SELECT * FROM Artist LIMIT 3",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT sum(x) FROM c",
    "VALUES (1, 'a'), (2, 'b')",
    "SELECT printf('%05d', 42), upper('a'), json_extract('{\"a\": 1}', '$.a'), group_concat(Name) FROM Genre",
    "PRAGMA table_info(Artist)",
    "PRAGMA table_xinfo('Artist')",
    "PRAGMA foreign_key_list(Track)",
    "PRAGMA index_list(Track)",
    "PRAGMA index_info(IFK_TrackAlbumId)",
    "PRAGMA user_version",
    "PRAGMA journal_mode",
    "PRAGMA page_count",
    "PRAGMA table_list",
    "PRAGMA quick_check",
    "SELECT * FROM pragma_table_info('Track')",
    "SELECT name FROM pragma_table_list WHERE schema = 'main'",
    "SELECT * FROM sqlite_master",
    "SELECT * FROM sqlite_temp_master",
    "EXPLAIN QUERY PLAN SELECT * FROM Track WHERE AlbumId = 1",
    "SELECT 1; -- a trailing comment is not a second statement",
]


@pytest.mark.parametrize("sql", ALLOWED)
def test_reads_functions_ctes_and_read_only_pragmas_are_allowed(chinook: Path, sql: str) -> None:
    with open_readonly(chinook) as db:
        result = db.execute(sql)
    assert result.columns


def test_hostile_suite_leaves_every_shared_database_unchanged(tmp_path: Path) -> None:
    paths = [
        shared_data("sample/northwind.sqlite"),
        shared_data("sample/sakila.sqlite"),
        shared_data("awkward/datasette_fixtures.sqlite"),
        shared_data("awkward/anki_schema17.anki2"),
        shared_data("awkward/wal/wal_database.db"),
    ]
    before = {p: _fingerprint(p) for p in paths}
    wal_before = _fingerprint(Path(f"{paths[-1]}-wal"))
    for path in paths:
        db: ReadOnlyDatabase = open_readonly(path)
        with db:
            for template in HOSTILE:
                with pytest.raises(QueryDenied):
                    db.execute(template.replace("{tmp}", str(tmp_path)).replace("Artist", "sqlite_master"))
    assert {p: _fingerprint(p) for p in paths} == before
    assert _fingerprint(Path(f"{paths[-1]}-wal")) == wal_before


@pytest.mark.parametrize("sql", ["SELECT 1;", "SELECT 1;;", "SELECT 1; ;\n", "SELECT 1 /* x */ ;  "])
def test_trailing_semicolons_are_one_statement(chinook: Path, sql: str) -> None:
    with open_readonly(chinook) as db:
        assert db.execute(sql).rows == [(1,)]
        with db.cursor(sql) as cursor:
            assert cursor.fetch_page(5) == [(1,)]
