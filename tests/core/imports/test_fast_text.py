"""The fast CSV path (pyarrow + ADBC) makes the database the general path makes, cell for cell.

Every real delimited file in ``files/`` is imported twice, through each path, and the two
databases compared: the schema (declared types, original names in comments), the ``_columns``
note, every value with its storage class, and the notes.  Then what only a large file meets: a
type that changes after the first guess, a ragged row or a bad byte far down, Stop mid-import.
"""

from __future__ import annotations

import gzip
import sqlite3
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core import imports
from sqale_desktop.core.imports import ImportCancelled, ImportLimits, arrow_writer, fast_text, import_source

pytestmark = pytest.mark.usefixtures("untouched")

FAST = ImportLimits(fast_text_bytes=0)  # the fast path for a file of any size

TEXT_SUFFIXES = (".csv", ".tsv", ".txt", ".tab")


def dump(db_path: Path) -> dict[str, Any]:
    """Everything a person or the agent can see of an imported database."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        tables: dict[str, Any] = {}
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            columns = [row[1] for row in conn.execute(f'PRAGMA table_info("{name}")')]
            values = conn.execute(f'SELECT * FROM "{name}" ORDER BY rowid').fetchall()
            kinds: list[tuple[Any, ...]] = [() for _ in values]
            for start in range(0, len(columns), 1000):  # a result holds at most 2,000 columns
                typeofs = ", ".join(f'typeof("{c}")' for c in columns[start : start + 1000])
                for i, row in enumerate(conn.execute(f'SELECT {typeofs} FROM "{name}" ORDER BY rowid')):
                    kinds[i] += row
            tables[name] = list(zip(values, kinds, strict=True))
        return {"schema": schema, "tables": tables}
    finally:
        conn.close()


def both_ways(
    path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, limits: ImportLimits = FAST
) -> tuple[Any, Any, bool]:
    """(general path's import, fast path's import, whether the fast path took the file); the fast
    path's import within ``limits``."""
    general = import_source(path, limits=replace(limits, fast_text_bytes=1 << 62))
    general_dump = dump(general.db_path), general.summary, general.notes
    monkeypatch.setenv("SQALE_DESKTOP_HOME", str(tmp_path / "fast-home"))
    taken: list[bool] = []
    real_write = fast_text.write_table

    def spy(*args: Any, **kwargs: Any) -> Any:
        try:
            table = real_write(*args, **kwargs)
        except fast_text.NotFast:
            taken.append(False)
            raise
        taken.append(True)
        return table

    monkeypatch.setattr(fast_text, "write_table", spy)
    fast = import_source(path, limits=limits)
    return general_dump, (dump(fast.db_path), fast.summary, fast.notes), bool(taken and taken[-1])


def test_every_real_text_file_imports_the_same_both_ways(
    files: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    paths = sorted(p for p in files.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    assert len(paths) >= 25
    fast_taken = []
    for path in paths:
        monkeypatch.setenv("SQALE_DESKTOP_HOME", str(tmp_path / path.name / "general-home"))
        try:
            general, fast, taken = both_ways(path, monkeypatch, tmp_path / path.name)
        except imports.ImportFailed as exc:
            # A file neither path imports (empty, binary, prose) must be refused by the fast one too.
            with pytest.raises(imports.ImportFailed) as again:
                import_source(path, limits=FAST)
            assert str(again.value) == str(exc)
            continue
        assert fast == general, path.name
        if taken:
            fast_taken.append(path.name)
    # The files the fast path declines: ragged rows, too many columns, nothing to import.
    declined = sorted(p.name for p in paths if p.name not in fast_taken)
    assert declined == ["csvkit__bad.csv", "frictionless__empty.csv", "frictionless__wide.csv"]
    assert "fivethirtyeight__state_legislative_district_analysis.csv" in fast_taken
    assert "quotes_and_newlines.csv" in fast_taken
    # other codecs, through a UTF-8 copy of the file
    assert {"frictionless__table-with-accents.csv", "csvkit__test_latin1.csv"} <= set(fast_taken)
    assert "csvkit__test_utf16_little.csv" in fast_taken


def write_csv(path: Path, header: str, lines: list[str]) -> Path:
    path.write_text(header + "\n" + "\n".join(lines) + "\n", encoding="utf-8", newline="")
    return path


def test_a_type_broken_after_the_first_guess_is_imported_with_the_whole_files_type(
    tmp_path: Path, rows: Any
) -> None:
    """The first 8 MB (here 2 KB) say INTEGER and REAL; a later cell says TEXT: the table is written
    again with that type, every cell exactly as the file has it ("1.50" is not 1.5)."""
    lines = [f"{i},{i}.50,{i % 2 == 0}" for i in range(20_000)]
    lines[15_000] = "n/a,also n/a,true"
    path = write_csv(tmp_path / "late.csv", "id,price,even", lines)
    result = import_source(path, limits=replace(FAST, guess_bytes=2048, block_bytes=1024))
    got = rows(result.db_path, "SELECT id, typeof(id), price, even, typeof(even) FROM late ORDER BY rowid")
    assert len(got) == 20_000
    assert got[1] == ("1", "text", "1.50", 0, "integer")
    assert got[15_000] == ("n/a", "text", "also n/a", 1, "integer")
    declared = rows(result.db_path, "SELECT type FROM _columns WHERE table_name = 'late' ORDER BY position")
    assert declared == [("TEXT",), ("TEXT",), ("BOOLEAN",)]


def test_a_column_empty_at_first_takes_the_type_of_its_later_values(tmp_path: Path, rows: Any) -> None:
    lines = [f"{i}," for i in range(5000)] + [f"{i},{i * 2}" for i in range(5000, 6000)]
    limits = replace(FAST, guess_bytes=1024, block_bytes=1024)
    result = import_source(write_csv(tmp_path / "sparse.csv", "id,later", lines), limits=limits)
    assert rows(result.db_path, "SELECT count(later), typeof(max(later)), max(later) FROM sparse") == [
        (1000, "integer", 11998)
    ]


@pytest.mark.parametrize(
    ("bad_line", "note"),
    [
        ("1,2,3,4", "had more fields than the header"),
        ("1", "had fewer fields than the header"),
    ],
)
def test_a_ragged_row_far_down_goes_to_the_general_path(
    tmp_path: Path, rows: Any, bad_line: str, note: str
) -> None:
    lines = [f"{i},{i},{i}" for i in range(10_000)]
    lines[9_000] = bad_line
    path = write_csv(tmp_path / "ragged.csv", "a,b,c", lines)
    result = import_source(path, limits=replace(FAST, block_bytes=4096))
    assert rows(result.db_path, "SELECT count(*) FROM ragged") == [(10_000,)]
    assert any(note in n for n in result.notes), result.notes


def test_a_byte_that_is_not_utf8_far_down_is_read_as_latin1_as_the_general_path_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: Any
) -> None:
    body = "".join(f"{i},caf\u00e9\n" for i in range(40_000)).encode()
    path = tmp_path / "mixed.csv"
    path.write_bytes(b"id,name\n" + body + b"40000,caf\xe9\n")  # past the 256 KB the codec is found from
    general, fast, taken = both_ways(path, monkeypatch, tmp_path, replace(FAST, block_bytes=4096))
    assert taken and fast == general
    result = import_source(path)
    assert rows(result.db_path, "SELECT count(*), max(id), max(name) FROM mixed") == [
        (40_001, 40_000, "caf\u00e9")  # the file's last byte, as Latin-1 reads it
    ]
    assert any("read as Latin-1" in n for n in result.notes), result.notes


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_a_large_cp1252_file_takes_the_fast_path_through_a_utf8_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: Any, suffix: str
) -> None:
    """A spreadsheet export in Windows' code page: imported as the general path imports it, and the
    UTF-8 copy Arrow read is gone from the cache afterwards."""
    from sqale_desktop.core import paths

    lines = [f"{i};Caf\u00e9 M\u00fcller {i};{i},{i % 100:02d} \u20ac" for i in range(30_000)]
    data = ("id;name;price\n" + "\n".join(lines) + "\n").encode("cp1252")
    path = tmp_path / f"export{suffix}"
    path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    # blocks of 1,000 bytes split the € (3 UTF-8 bytes)
    limits = replace(FAST, block_bytes=8192, transcode_bytes=1000)
    general, fast, taken = both_ways(path, monkeypatch, tmp_path, limits)
    assert taken and fast == general
    result = import_source(path)
    assert rows(result.db_path, "SELECT count(*), max(name), typeof(max(price)) FROM export") == [
        (30_000, "Caf\u00e9 M\u00fcller 9999", "text")
    ]
    assert "read as cp1252" in result.notes[0], result.notes
    assert [p.name for p in paths.cache_dir().rglob("*.utf-8.txt")] == []


def test_a_byte_cp1252_does_not_define_far_down_makes_the_copy_latin1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "".join(f"{i},M\u00fcller\n" for i in range(40_000)).encode("cp1252")
    path = tmp_path / "odd.csv"
    path.write_bytes(b"id,name\n" + body + b"40000,\x81\n")  # 0x81: no character in cp1252
    general, fast, taken = both_ways(path, monkeypatch, tmp_path, replace(FAST, transcode_bytes=4096))
    assert taken and fast == general
    assert any("read as Latin-1" in n for n in fast[2]), fast[2]


def test_a_large_gzipped_csv_takes_the_fast_path(tmp_path: Path, rows: Any) -> None:
    """Over ``fast_text_bytes`` with the default limits; the fast path's page size shows it."""
    lines = [f"{i},name {i},{i / 4},0{i % 999:03d}" for i in range(400_000)]
    path = tmp_path / "big.csv.gz"
    data = ("id,name,score,code\n" + "\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data, compresslevel=0))
    assert path.stat().st_size >= ImportLimits().fast_text_bytes
    result = import_source(path)
    assert rows(result.db_path, "PRAGMA page_size") == [(arrow_writer.PAGE_SIZE,)]
    assert rows(result.db_path, "SELECT count(*), sum(id), typeof(score), max(code) FROM big") == [
        (400_000, sum(range(400_000)), "real", "0998")
    ]


def test_stop_mid_import_keeps_nothing(tmp_path: Path, left_in_cache: Any) -> None:
    path = write_csv(tmp_path / "stop.csv", "a,b", [f"{i},{i}" for i in range(200_000)])
    cancel = threading.Event()
    seen: list[int] = []

    def progress(report: imports.ImportProgress) -> None:
        seen.append(report.rows)
        if report.rows > 0:
            cancel.set()

    with pytest.raises(ImportCancelled):
        import_source(path, progress=progress, cancel=cancel, limits=replace(FAST, block_bytes=8192))
    assert seen and 0 < max(seen) < 200_000
    assert left_in_cache() == []
    assert not [t for t in threading.enumerate() if t.name.startswith("import-")]  # joined before the raise


def test_decimal_commas_and_quoted_header_lines_import_the_same_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [f'{i};"{i},25";"Zeile {i}";{"wahr" if i % 2 else "1"}' for i in range(3000)]
    path = write_csv(tmp_path / "de.csv", 'Nr;"Betrag\n(EUR)";Text;Flag', lines)
    monkeypatch.setenv("SQALE_DESKTOP_HOME", str(tmp_path / "general-home"))
    general, fast, taken = both_ways(path, monkeypatch, tmp_path)
    assert taken
    assert fast == general
    first = ((0, 0.25, "Zeile 0", "1"), ("integer", "real", "text", "text"))  # wahr/1: mixed, text
    assert general[0]["tables"]["de"][0] == first


def test_a_folder_of_csvs_imports_the_same_both_ways_with_its_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each CSV of a folder is written in a file of its own, then copied into the staging database:
    the keys are inferred from it as from the general path's tables, and declared the same."""
    from tests.core.imports.test_folder_keys import shop

    folder = shop(tmp_path / "shop")
    monkeypatch.setenv("SQALE_DESKTOP_HOME", str(tmp_path / "general-home"))
    general, fast, taken = both_ways(folder, monkeypatch, tmp_path)
    assert taken
    assert fast == general
    schema = {name: sql for _kind, name, sql in fast[0]["schema"]}
    assert 'FOREIGN KEY ("customer_id") REFERENCES "customers" ("id")' in schema["orders"]
    assert not list((tmp_path / "fast-home").rglob("*.fast"))  # the per-file copies are gone
