"""Small hostile files (issue 30): each ends in a clear message or a complete import, never a
traceback, memory spent ahead of the checks, or a byte of anything but the file in the cache."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import threading
import zipfile
from pathlib import Path

import pytest

from sqale_desktop.core import paths, settings
from sqale_desktop.core.errors import is_known
from sqale_desktop.core.imports import ImportFailed, import_source, text


def _fails(path: Path, says: str) -> ImportFailed:
    with pytest.raises(ImportFailed, match=says) as caught:
        import_source(path)
    assert is_known(caught.value)
    str(caught.value).encode("utf-8")  # printable anywhere: terminal, window, log
    assert not list(paths.cache_dir().rglob("*.sqlite"))
    return caught.value


def _cache_bytes() -> bytes:
    return b"".join(p.read_bytes() for p in paths.cache_dir().rglob("*") if p.is_file())


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return list(conn.execute(sql))
    finally:
        conn.close()


# DuckDB: the file reads only itself


def test_a_duckdb_file_whose_views_read_other_files_imports_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duckdb

    monkeypatch.setenv("SQALE_DESKTOP_API_KEY", "env-marker-4f1c9a")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "key.txt").write_text("file-marker-77e0b3\n", encoding="utf-8")
    hostname = Path("/etc/hostname").read_bytes().strip() if Path("/etc/hostname").is_file() else b""
    path = tmp_path / "hostile.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE kept (id INTEGER, name VARCHAR)")
    con.execute("INSERT INTO kept VALUES (1, 'a'), (2, 'b')")
    con.execute("CREATE VIEW environ AS SELECT * FROM read_blob('/proc/self/environ')")
    con.execute(f"CREATE VIEW folder_text AS SELECT * FROM read_text('{secrets}/*')")
    con.execute(f"CREATE VIEW listing AS SELECT * FROM glob('{secrets}/*')")
    if hostname:
        con.execute("CREATE VIEW host AS SELECT * FROM read_text('/etc/hostname')")
    con.close()

    result = import_source(path)

    assert [t.name for t in result.tables] == ["kept"]
    assert _rows(result.db_path, "SELECT id, name FROM kept ORDER BY id") == [(1, "a"), (2, "b")]
    said = " ".join(result.notes)
    for view in ("environ", "folder_text", "listing", *(["host"] if hostname else [])):
        assert f"view {view} not imported" in said
    cached = _cache_bytes()
    # (the views' own text, which names the paths, is the file's and may be quoted in the notes)
    for marker in (b"env-marker-4f1c9a", b"file-marker-77e0b3", b"key.txt"):
        assert marker not in cached
    if len(hostname) >= 6:
        assert hostname not in cached


def test_a_duckdb_file_cannot_turn_external_access_back_on(tmp_path: Path) -> None:
    import duckdb

    from sqale_desktop.core.imports import typed

    path = tmp_path / "plain.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT 1 AS x")
    con.close()
    opened = duckdb.connect(str(path), read_only=True, config=dict(typed.DUCKDB_CONFIG))
    try:
        with pytest.raises(duckdb.Error):
            opened.execute("SET enable_external_access = true")
        with pytest.raises(duckdb.Error):
            opened.execute("SELECT * FROM read_text('/etc/passwd')").fetchall()
    finally:
        opened.close()


# JSON


def test_an_object_of_too_many_keys_is_refused_at_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "wide.json"
    wide = "{" + ",".join(f'"k{i}": {i}' for i in range(100_000)) + "}"
    path.write_text("[" + wide + "," + ",".join(["{}"] * 20_000) + "]", encoding="utf-8")
    _fails(path, "more than 2,000 different keys")


def test_json_lines_of_too_many_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "wide.jsonl"
    lines = [json.dumps({f"k{i}": i}) for i in range(3_000)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _fails(path, "more than 2,000 different keys")


def test_a_gzipped_array_of_blanks_is_refused(tmp_path: Path) -> None:
    from sqale_desktop.core.imports import json_source

    path = tmp_path / "blank.json.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(b"[")
        block = b" " * (1 << 20)
        for _ in range(json_source.BLANK_CHARS // len(block) + 2):
            out.write(block)
        out.write(b"]")
    _fails(path, "blank characters in a row")


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("deep_array.json", "[" + "[" * 2000 + "]" * 2000 + "]"),
        ("deep_object.json", '{"a": ' + "[" * 2000 + "]" * 2000 + "}"),
        ("deep.jsonl", '{"a": ' + "[" * 2000 + "]" * 2000 + "}\n"),
    ],
)
def test_json_nested_2000_levels_deep_is_a_message(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    _fails(path, "nested deeper than")


@pytest.mark.parametrize("name", ["big.json", "big.jsonl", "big_object.json"])
def test_an_integer_of_5000_digits_is_kept_as_its_digits(tmp_path: Path, name: str) -> None:
    digits = "7" * 5000
    path = tmp_path / name
    if name == "big.jsonl":
        path.write_text('{"id": 1, "n": ' + digits + "}\n" + '{"id": 2, "n": 5}\n', encoding="utf-8")
    elif name == "big_object.json":
        path.write_text('{"rows": [{"id": 1, "n": ' + digits + '}, {"id": 2, "n": 5}]}', encoding="utf-8")
    else:
        path.write_text('[{"id": 1, "n": ' + digits + '}, {"id": 2, "n": 5}]', encoding="utf-8")
    result = import_source(path)
    table = result.tables[0].name
    values = _rows(result.db_path, f'SELECT CAST(n AS TEXT) FROM "{table}" ORDER BY id')
    assert values == [(digits,), ("5",)]


@pytest.mark.parametrize("name", ["lone.json", "lone.jsonl"])
def test_an_escaped_lone_surrogate_is_replaced(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text('{"a": "x\\ud800y", "\\udc00k": 1}\n', encoding="utf-8")
    else:
        path.write_text('[{"a": "x\\ud800y", "\\udc00k": 1}]', encoding="utf-8")
    result = import_source(path)
    assert _rows(result.db_path, "SELECT a FROM lone") == [("x\ufffdy",)]
    assert [c[1] for c in _rows(result.db_path, "PRAGMA table_info(lone)")] == ["a", "\ufffdk"]


@pytest.mark.parametrize(
    ("content", "says"),
    [("{}", "empty object"), ("[{}]", "no columns"), ("[{}, {}]", "no columns"), ("[]", "no columns")],
)
def test_json_without_keys_is_a_message(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "nothing.json"
    path.write_text(content, encoding="utf-8")
    _fails(path, says)


# Delimited text


def test_a_gzipped_csv_of_one_huge_line_is_refused_as_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.csv.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(b"a,b\n1,")
        block = b"x" * (1 << 20)
        for _ in range(text.LINE_BYTES // len(block) + 2):
            out.write(block)
        out.write(b"\n")
    _fails(path, "a line of more than 64 MB")


def test_a_gzipped_csv_of_one_huge_quoted_field_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "field.csv.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(b'a,b\n1,"')
        block = (b"x" * 1023 + b"\n") * 1024
        for _ in range(text.FIELD_CHARS // len(block) + 2):
            out.write(block)
        out.write(b'"\n')
    _fails(path, "a field of more than 32 MB")


def test_a_truncated_csv_gz_is_a_message(tmp_path: Path) -> None:
    whole = gzip.compress(b"a,b\n" + b"".join(b"%d,%d\n" % (i, i * 7) for i in range(200_000)))
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(whole[: len(whole) // 2])
    _fails(path, "ends early")


def test_a_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    path = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9.csv"))
    try:
        path.write_text("id,name\n1,a\n2,b\n", encoding="utf-8")
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    result = import_source(path)
    result.details().encode("utf-8")
    assert result.tables[0].rows == 2
    assert import_source(path).reused  # its manifest was written and read back
    bad = Path(os.fsdecode(bytes(tmp_path) + b"/d\xe9j\xe0.json"))
    bad.write_text("{oops", encoding="utf-8")
    with pytest.raises(ImportFailed, match="not valid JSON") as caught:
        import_source(bad)
    assert "d\ufffdj\ufffd.json" in str(caught.value)


# Workbooks


def _workbook(path: Path, cell: str) -> None:
    """A minimal .xlsx whose A2 is ``cell`` (a <c> element) under the header ``when``, with a date
    style (number format 14) as style 1."""
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    kinds = "application/vnd.openxmlformats-officedocument.spreadsheetml"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/xl/workbook.xml" ContentType="{kinds}.sheet.main+xml"/>'
            f'<Override PartName="/xl/styles.xml" ContentType="{kinds}.styles+xml"/>'
            f'<Override PartName="/xl/worksheets/sheet1.xml" ContentType="{kinds}.worksheet+xml"/></Types>',
        )
        z.writestr(
            "_rels/.rels",
            '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
            f'relationships"><Relationship Id="rId1" Type="{rel}/officeDocument" Target="xl/workbook.xml"/>'
            "</Relationships>",
        )
        z.writestr(
            "xl/workbook.xml",
            f'<?xml version="1.0"?><workbook {ns} xmlns:r="{rel}"><sheets>'
            '<sheet name="data" sheetId="1" r:id="rId1"/></sheets></workbook>',
        )
        z.writestr(
            "xl/_rels/workbook.xml.rels",
            '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
            f'relationships"><Relationship Id="rId1" Type="{rel}/worksheet" Target="worksheets/sheet1.xml"/>'
            f'<Relationship Id="rId2" Type="{rel}/styles" Target="styles.xml"/></Relationships>',
        )
        z.writestr(
            "xl/styles.xml",
            f'<?xml version="1.0"?><styleSheet {ns}><cellXfs count="2"><xf numFmtId="0"/>'
            '<xf numFmtId="14" applyNumberFormat="1"/></cellXfs></styleSheet>',
        )
        z.writestr(
            "xl/worksheets/sheet1.xml",
            f'<?xml version="1.0"?><worksheet {ns}><sheetData>'
            '<row r="1"><c r="A1" t="inlineStr"><is><t>when</t></is></c></row>'
            f'<row r="2">{cell}</row></sheetData></worksheet>',
        )


@pytest.mark.parametrize("value", ["1e300", "-1e300"])
def test_a_workbook_date_far_out_of_range_is_a_message_or_a_value(tmp_path: Path, value: str) -> None:
    """calamine panics (pyo3's PanicException, a BaseException) converting -1e300 days to a date."""
    path = tmp_path / "dates.xlsx"
    _workbook(path, f'<c r="A2" s="1"><v>{value}</v></c>')
    if value.startswith("-"):
        failed = _fails(path, "dates.xlsx is not a workbook this import reads: calamine stopped on it")
        assert "out of bounds" in str(failed)
    else:
        assert import_source(path).tables[0].rows == 1


# The size limit on what an import writes


def test_a_parquet_file_that_expands_past_the_limit_stops_with_a_message(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    settings.save(settings.Settings(import_write_limit_mb=16))
    path = tmp_path / "bomb.parquet"
    rows = 2_000_000
    pq.write_table(pa.table({"text": pa.array(["x" * 40] * rows)}), path, compression="zstd")
    assert path.stat().st_size < 1_000_000
    _fails(path, "more than 16 MB once imported")
    assert not list(paths.cache_dir().rglob(".building/*"))


def test_a_small_parquet_file_under_the_limit_imports(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    settings.save(settings.Settings(import_write_limit_mb=16))
    path = tmp_path / "small.parquet"
    pq.write_table(pa.table({"n": pa.array(range(1000))}), path)
    assert import_source(path).tables[0].rows == 1000


def test_a_csv_that_expands_past_the_limit_by_the_general_path(tmp_path: Path) -> None:
    settings.save(settings.Settings(import_write_limit_mb=16))
    path = tmp_path / "many.csv.gz"
    line = b"1,abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\n"
    path.write_bytes(gzip.compress(b"n,t\n" + line * 400_000, compresslevel=1))
    _fails(path, "more than 16 MB once imported")


# Two imports of one file at once


def test_two_imports_of_one_file_at_once_both_succeed(tmp_path: Path) -> None:
    path = tmp_path / "twice.csv"
    path.write_text("id,name\n" + "".join(f"{i},name {i}\n" for i in range(100_000)), encoding="utf-8")
    start = threading.Barrier(2)
    results: list[object] = []

    def run() -> None:
        start.wait(timeout=10)
        try:
            results.append(import_source(path))
        except BaseException as exc:  # collected for the assertion below
            results.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert all(not isinstance(r, BaseException) for r in results), results
    assert len(results) == 2
    assert sorted(r.reused for r in results) == [False, True]  # type: ignore[attr-defined]


# Folders


def test_a_folder_skips_bad_empty_and_outside_files_with_a_note(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_text("secret\nouter-marker-51d2\n", encoding="utf-8")
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "good.csv").write_text("id,name\n1,a\n", encoding="utf-8")
    (folder / "empty.csv").write_bytes(b"")
    (folder / "binary.csv").write_bytes(b"\x00\x01\x02\x03" * 1000)
    (folder / "link.csv").symlink_to(outside / "secret.csv")
    (folder / "inner.csv").symlink_to(folder / "good.csv")
    result = import_source(folder)
    assert sorted(t.name for t in result.tables) == ["good", "inner"]
    said = " ".join(result.notes)
    assert "empty.csv skipped: it is empty" in said
    assert "binary.csv skipped" in said
    assert "link.csv skipped: a link to a file outside the folder" in said
    assert b"outer-marker-51d2" not in _cache_bytes()


def test_a_folder_where_no_file_imports_is_a_message(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "binary.csv").write_bytes(b"\x00\x01\x02\x03" * 1000)
    _fails(folder, "No file of the folder data could be imported")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads every file")
def test_a_folder_skips_an_unreadable_file(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "good.csv").write_text("id\n1\n", encoding="utf-8")
    locked = folder / "locked.csv"
    locked.write_text("id\n2\n", encoding="utf-8")
    locked.chmod(0)
    try:
        result = import_source(folder)
    finally:
        locked.chmod(0o600)
    assert [t.name for t in result.tables] == ["good"]
    assert "locked.csv skipped: it cannot be read" in " ".join(result.notes)
