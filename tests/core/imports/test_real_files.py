"""Each real file of ../shared/data/files imports, and holds what an independent reader sees.

CSVs are read back with the standard library's ``csv`` (told the encoding and delimiter, not
guessing them), Parquet with ``pyarrow``, JSON with ``json``; the imported values are compared cell
by cell with the types the import promises (integers, reals, text kept as written, NULL for empty).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core.imports import ImportFailed, import_source

pytestmark = pytest.mark.usefixtures("untouched")

# file, encoding, delimiter: how the file really is (from files/README.md)
CSVS = [
    ("csv/csv-spectrum/comma_in_quotes.csv", "utf-8", ","),
    ("csv/csv-spectrum/empty.csv", "utf-8", ","),
    ("csv/csv-spectrum/empty_crlf.csv", "utf-8", ","),
    ("csv/csv-spectrum/escaped_quotes.csv", "utf-8", ","),
    ("csv/csv-spectrum/json.csv", "utf-8", ","),
    ("csv/csv-spectrum/newlines.csv", "utf-8", ","),
    ("csv/csv-spectrum/newlines_crlf.csv", "utf-8", ","),
    ("csv/csv-spectrum/quotes_and_newlines.csv", "utf-8", ","),
    ("csv/csv-spectrum/simple.csv", "utf-8", ","),
    ("csv/csv-spectrum/simple_crlf.csv", "utf-8", ","),
    ("csv/csv-spectrum/utf8.csv", "utf-8", ","),
    ("csv/frictionless__issue-811.csv", "cp1252", ";"),
    ("csv/frictionless__table-with-accents.csv", "cp1252", ";"),
    ("csv/fivethirtyeight__pollster-ratings-2019.csv", "utf-8-sig", ","),
    ("csv/csvkit__FY09_EDU_Recipients_by_State.csv", "utf-8", ","),
    ("csv/frictionless__duplicate-headers.csv", "utf-8", ","),
    ("csv/frictionless__blank-headers.csv", "utf-8", ","),
    ("csv/csvkit__test_latin1.csv", "latin-1", ","),
    ("csv/csvkit__test_utf8_bom.csv", "utf-8-sig", ","),
    ("csv/csvkit__test_utf16_little.csv", "utf-16", ","),
    ("csv/csvkit__mac_newlines.csv", "utf-8", ","),
    ("csv/csvkit__null_byte.csv", "utf-8", ","),
    ("csv/fivethirtyeight__nutrition_raw_anonymized_data.csv", "utf-8", ","),
    ("csv/fivethirtyeight__state_legislative_district_analysis.csv", "utf-8", ","),
    ("tsv/vega__unemployment.tsv", "utf-8", "\t"),
]


def _expected(cell: str, declared: str) -> Any:
    """What an imported cell holds for the source text ``cell`` in a column of ``declared`` type."""
    if cell == "":
        return None
    if declared == "INTEGER":
        return int(cell)
    if declared == "REAL":
        return float(cell.replace(",", "."))
    if declared == "BOOLEAN":
        return {"true": 1, "false": 0}[cell.lower()]
    return cell


@pytest.mark.parametrize(("name", "encoding", "delimiter"), CSVS, ids=[c[0].split("/")[-1] for c in CSVS])
def test_a_csv_holds_what_the_csv_module_reads(
    files: Path, rows: Any, name: str, encoding: str, delimiter: str
) -> None:
    path = files / name
    result = import_source(path)
    with open(path, encoding=encoding, newline="") as handle:
        source = [r for r in csv.reader(handle, delimiter=delimiter) if r]
    header, data = source[0], source[1:]
    (table,) = result.tables
    assert table.rows == len(data)
    columns = rows(result.db_path, f'SELECT name, type FROM pragma_table_info("{table.name}")')
    assert len(columns) == len(header)
    originals = rows(
        result.db_path,
        "SELECT original_name FROM _columns WHERE table_name = ? ORDER BY position",
        (table.name,),
    )
    assert [o for (o,) in originals] == header  # the original names are kept, duplicates and blanks too
    got = rows(result.db_path, f'SELECT * FROM "{table.name}" ORDER BY rowid')
    for source_row, got_row in zip(data, got, strict=True):
        padded = source_row + [""] * (len(header) - len(source_row))
        assert list(got_row) == [_expected(c, t) for c, (_, t) in zip(padded, columns, strict=True)]


def test_leading_zeros_and_spaces_stay_text(files: Path, rows: Any) -> None:
    """ISTAT's codes (``01``, `` 001 ``) are identifiers: never numbers that lose their zeros."""
    result = import_source(files / "csv/frictionless__issue-811.csv")
    table = result.tables[0].name
    types = dict(rows(result.db_path, f'SELECT name, type FROM pragma_table_info("{table}")'))
    code = next(n for n in types if n.startswith("Codice Regione"))
    assert types[code] == "TEXT"
    assert rows(result.db_path, f'SELECT "{code}" FROM "{table}" LIMIT 1') == [("01",)]


def test_decimal_commas_with_semicolons_are_reals(files: Path, rows: Any) -> None:
    result = import_source(files / "csv/frictionless__table-with-accents.csv")
    table = result.tables[0].name
    assert rows(result.db_path, f'SELECT "Occupancy rate", "Année" FROM "{table}" LIMIT 1') == [
        (0.611553068, 2013)
    ]
    assert (
        dict(rows(result.db_path, f'SELECT name, type FROM pragma_table_info("{table}")'))["Quartier"]
        == "TEXT"
    )


def test_titles_above_the_header_are_skipped_with_a_note(files: Path, rows: Any) -> None:
    result = import_source(files / "csv/csvkit__Datagov_FY10_EDU_recp_by_State.csv")
    table = result.tables[0].name
    names = [n for (n,) in rows(result.db_path, f'SELECT name FROM pragma_table_info("{table}")')]
    assert names[:2] == ["State Name", "State Abbreviate"]
    assert any("above the header skipped" in n for n in result.notes)


def test_ragged_rows_lose_nothing(files: Path, rows: Any) -> None:
    result = import_source(files / "csv/csvkit__bad.csv")
    table = result.tables[0].name
    got = rows(result.db_path, f'SELECT * FROM "{table}" ORDER BY rowid')
    assert got == [
        (1, "27", None, "I'm too long!"),
        (None, "I'm too short!", None, None),
        (0, "mixed types.... uh oh", 17, None),
    ]
    assert any("more fields than the header" in n for n in result.notes)
    assert any("fewer fields" in n for n in result.notes)


def test_a_file_in_no_consistent_codec_imports(files: Path) -> None:
    """poll-of-pollsters-3.tsv: CR-only, not UTF-8, and no codec gets it right; it imports whole."""
    result = import_source(files / "tsv/fivethirtyeight__poll-of-pollsters-3.tsv")
    assert result.tables[0].rows == 27
    assert result.tables[0].columns == 69


@pytest.mark.parametrize(
    "name",
    [
        "json/vega__penguins.json",
        "json/vega__political-contributions.json",
        "json/csvkit__testjson_nested.json",
    ],
)
def test_a_json_array_holds_its_objects(files: Path, rows: Any, name: str) -> None:
    result = import_source(files / name)
    objects = json.loads((files / name).read_bytes())
    (table,) = result.tables
    assert table.rows == len(objects)
    keys = list(dict.fromkeys(k for o in objects for k in o))
    got = rows(result.db_path, f'SELECT * FROM "{table.name}" ORDER BY rowid')
    types = [t for (t,) in rows(result.db_path, f'SELECT type FROM pragma_table_info("{table.name}")')]
    for obj, got_row in zip(objects, got, strict=True):
        for key, value, declared in zip(keys, got_row, types, strict=True):
            want = obj.get(key)
            if isinstance(want, dict | list):
                assert json.loads(value) == want
            elif want is None or want == "":
                assert value is None
            elif declared == "BOOLEAN":
                assert value == int(want)
            elif declared in ("INTEGER", "REAL"):
                assert value == pytest.approx(float(want))
            elif declared == "DATE" and not want[:4].isdigit():  # 01/31/2015: made ISO-8601
                first, second, year = re.split(r"[./-]", want)
                assert value in (f"{year}-{second:0>2}-{first:0>2}", f"{year}-{first:0>2}-{second:0>2}")
            else:  # text, and ISO dates kept as the text they were
                assert value == (want if isinstance(want, str) else json.dumps(want))


def test_json_lines_with_changing_keys_and_types(files: Path, rows: Any) -> None:
    result = import_source(files / "json/duckdb__inconsistent_schemas.ndjson")
    table = result.tables[0].name
    types = dict(rows(result.db_path, f'SELECT name, type FROM pragma_table_info("{table}")'))
    assert types["id"] == "TEXT"  # a string, an int and an array on different lines: mixed
    gsm = import_source(files / "json/gsm8k__test.jsonl")
    lines = (files / "json/gsm8k__test.jsonl").read_text(encoding="utf-8").splitlines()
    assert gsm.tables[0].rows == len(lines) == 1319
    first = json.loads(lines[0])
    assert rows(gsm.db_path, 'SELECT question, answer FROM "gsm8k__test" LIMIT 1') == [
        (first["question"], first["answer"])
    ]


def test_a_json_object_with_a_bom_gives_its_array(files: Path, rows: Any) -> None:
    result = import_source(files / "json/duckdb__sample_utf8_bom.json")
    assert [t.name for t in result.tables] == ["users"]
    assert any("metadata" in n for n in result.notes)


PARQUETS = [
    "parquet/duckdb__userdata1.parquet",
    "parquet/duckdb__apkwan.parquet",
    "parquet/duckdb__candidate.parquet",
    "parquet/parquet-testing__alltypes_plain.parquet",
    "parquet/parquet-testing__datapage_v2.snappy.parquet",
    "parquet/parquet-testing__fixed_length_decimal.parquet",
    "parquet/parquet-testing__nullable.impala.parquet",
    "parquet/parquet-testing__int96_from_spark.parquet",
]


@pytest.mark.parametrize("name", PARQUETS, ids=[p.split("/")[-1] for p in PARQUETS])
def test_a_parquet_file_holds_what_pyarrow_reads(files: Path, rows: Any, name: str) -> None:
    import pyarrow.parquet as pq

    source = pq.read_table(files / name, coerce_int96_timestamp_unit="us")
    result = import_source(files / name)
    (table,) = result.tables
    assert table.rows == source.num_rows
    assert table.columns == source.num_columns
    got = rows(result.db_path, f'SELECT * FROM "{table.name}" ORDER BY rowid')
    for index, field in enumerate(source.schema):
        want = source.column(index).to_pylist() if not str(field.type).startswith("timestamp") else []
        column = [r[index] for r in got]
        kind = str(field.type)
        if kind.startswith(("list", "struct", "map", "large_list")):
            assert [None if v is None else json.loads(v) for v in column] == json.loads(
                json.dumps(want, default=str)
            )
        elif kind.startswith(("int", "uint", "double", "float", "bool")):
            assert column == want
        elif kind.startswith("decimal"):
            assert column == [None if v is None else str(v) for v in want]
        elif kind.startswith("timestamp"):
            # Python's datetime, value by value: it cannot hold every year INT96 can; those are
            # left to test_int96_timestamps_past_2262_keep_their_year
            pairs = [(a, _iso(s)) for a, s in zip(column, source.column(index), strict=True)]
            checked = [(a, b) for a, b in pairs if b != "out of range"]
            assert checked and all((a or "")[:19] == (b or "")[:19] for a, b in checked)
        elif kind in ("string", "large_string"):
            assert column == want


def _iso(scalar: Any) -> str | None:
    try:
        value = scalar.as_py()
    except (OverflowError, ValueError):
        return "out of range"
    return None if value is None else value.isoformat(sep=" ")


def test_int96_timestamps_past_2262_keep_their_year(files: Path, rows: Any) -> None:
    """pyarrow's default nanosecond read wraps these to 1816 and 2147; the import does not."""
    result = import_source(files / "parquet/parquet-testing__int96_from_spark.parquet")
    years = {v[:-22] for (v,) in rows(result.db_path, f'SELECT * FROM "{result.tables[0].name}"') if v}
    assert "1816" not in years and "2147" not in years
    assert "-29221" in years  # a year no Python datetime holds, kept as ISO text


def test_nested_parquet_columns_are_json_with_a_note(files: Path) -> None:
    result = import_source(files / "parquet/parquet-testing__nullable.impala.parquet")
    assert any("nested values stored as JSON text" in n for n in result.notes)


WORKBOOKS = [
    ("excel/csvkit__sheets.xlsx", ["data", "ʤ"]),
    ("excel/fivethirtyeight__off-year-turnout-2023.xlsx", None),
    ("excel/frictionless__table-with-two-sheets.ods", ["Лист1", "Tabelle2"]),
    ("excel/calamine__any_sheets.xlsx", ["Visible"]),
    ("excel/csvkit__ne_1033_data.xlsx", ["NE data"]),
    ("excel/fivethirtyeight__lebron.xlsx", ["Sheet1"]),
    ("excel/calamine__merged_range.xlsx", ["Sheet1", "Sheet2"]),
    ("excel/calamine__merged_cells.ods", ["Sheet1"]),
    ("excel/calamine__date_1904.xlsx", ["Sheet1"]),
    ("excel/calamine__issues.xlsx", None),
    ("excel/frictionless__table-with-ints-floats-dates.ods", ["test"]),
    ("excel/calamine__any_sheets.ods", ["Visible"]),
    ("excel/calamine__errors.xlsx", ["Feuil1"]),  # formula errors only (test_sheet_errors.py)
]


@pytest.mark.parametrize(("name", "sheets"), WORKBOOKS, ids=[w[0].split("/")[-1] for w in WORKBOOKS])
def test_a_workbook_gives_a_table_per_sheet(
    files: Path, rows: Any, name: str, sheets: list[str] | None
) -> None:
    result = import_source(files / name)
    if sheets is not None:
        assert [t.name for t in result.tables] == sheets
    assert result.summary.startswith(f"{Path(name).name} — {len(result.tables)} sheet")
    tables = {n for (n,) in rows(result.db_path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {t.name for t in result.tables} | {"_columns"} == tables


def test_a_workbook_s_tables_hold_every_row_calamine_reads(files: Path, rows: Any) -> None:
    """The import reads sheets row by row; calamine's whole-sheet read is the independent count:
    every non-empty row below the header (the header is the first row of these sheets)."""
    from python_calamine import CalamineWorkbook

    name = "excel/fivethirtyeight__off-year-turnout-2023.xlsx"
    book = CalamineWorkbook.from_path(str(files / name))
    result = import_source(files / name)
    for table in result.tables:
        whole = book.get_sheet_by_name(table.name).to_python(skip_empty_area=True)
        expected = sum(1 for row in whole[1:] if any(c not in (None, "") for c in row))
        assert table.rows == expected, table.name
        assert rows(result.db_path, f'SELECT count(*) FROM "{table.name}"') == [(expected,)]


def test_a_workbook_s_progress_follows_the_rows_read(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Six sheets, read in batches of 50 rows: the bar moves with every batch and ends full."""
    from sqale_desktop.core.imports import ImportLimits, ImportProgress, progress

    monkeypatch.setattr(progress, "REPORT_INTERVAL_S", 0.0)  # every batch reported
    path = files / "excel/fivethirtyeight__off-year-turnout-2023.xlsx"
    seen: list[ImportProgress] = []
    import_source(path, progress=seen.append, limits=ImportLimits(batch_rows=50))
    done = [p.bytes_done for p in seen]
    assert done == sorted(done)
    assert len({d for d in done if 0 < d < path.stat().st_size}) >= 6
    assert seen[-1].fraction == 1.0


def test_sheet_cells_have_the_types_a_person_expects(files: Path, rows: Any) -> None:
    result = import_source(files / "excel/csvkit__sheets.xlsx")
    types = dict(rows(result.db_path, 'SELECT name, type FROM pragma_table_info("data")'))
    assert types == {
        "text": "TEXT",
        "date": "DATE",
        "integer": "INTEGER",
        "boolean": "BOOLEAN",
        "float": "REAL",
        "datetime": "DATETIME",
        "empty_column": "TEXT",
        "column_8": "TEXT",
    }
    assert rows(result.db_path, "SELECT text, date, integer, boolean, float FROM data LIMIT 1") == [
        ("Chicago Reader", "1971-01-01", 40, 1, 1.0)
    ]


def test_dates_of_the_1904_system(files: Path, rows: Any) -> None:
    sheets = import_source(files / "excel/csvkit__sheets.xlsx")
    # the 1904 system puts serial 0 in 1904; the sheet's dates are the ones Excel shows
    assert rows(sheets.db_path, "SELECT date FROM data WHERE text = 'Chicago Tribune'") == [("1920-01-01",)]


def test_duckdb_tables_and_views(files: Path, rows: Any) -> None:
    result = import_source(files / "duckdb/jaffle_shop.duckdb")
    names = {t.name for t in result.tables}
    assert {"raw_customers", "raw_orders", "raw_payments"} <= names
    assert "customers" not in names  # the broken view, said in a note
    assert any("customers" in n and "not imported" in n for n in result.notes)
    assert rows(result.db_path, "SELECT COUNT(*) FROM raw_customers") == [(100,)]


def test_a_duckdb_file_named_db_with_its_keys(files: Path, rows: Any) -> None:
    result = import_source(files / "duckdb/index_0-9-1.db")
    assert {t.name for t in result.tables} == {"fk_tbl", "idx_tbl", "pk_tbl"}
    assert rows(result.db_path, 'SELECT "table", "from", "to" FROM pragma_foreign_key_list(\'fk_tbl\')') == [
        ("pk_tbl", "id", "id")
    ]


def test_a_duckdb_table_that_exists_only_in_the_wal(files: Path, rows: Any) -> None:
    result = import_source(files / "duckdb/wal_test_092.db")
    assert rows(result.db_path, "SELECT COUNT(*) FROM integers") == [(1000,)]


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("duckdb/jaffle_shop_v0.8_storage51.duckdb", "storage version"),
        ("duckdb/invalid_database_from_the_future.db", "cannot be read by DuckDB"),
        ("parquet/parquet-testing__bad_PARQUET-1481.parquet", "not a readable Parquet file"),
        ("csv/frictionless__empty.csv", "is empty"),
        ("csv/frictionless__wide.csv", "9,074 columns"),
    ],
)
def test_unreadable_real_files_get_a_clear_message(files: Path, name: str, says: str) -> None:
    with pytest.raises(ImportFailed, match=says):
        import_source(files / name)


def test_a_header_only_file_is_an_empty_table(files: Path, rows: Any) -> None:
    result = import_source(files / "csv/frictionless__without-rows.csv")
    assert result.tables[0].rows == 0
    assert rows(result.db_path, 'SELECT name FROM pragma_table_info("frictionless__without-rows")') == [
        ("id",),
        ("name",),
    ]
    assert any("header but no rows" in n for n in result.notes)
