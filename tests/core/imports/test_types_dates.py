"""Dates that are not ISO: a column in one clear day-first or month-first layout becomes ISO-8601
text declared DATE (so ORDER BY, BETWEEN and strftime are right); an ambiguous column, or one of
two-digit years, stays as written and the import's note says why.  Both import paths agree."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqale_desktop.core.imports import ImportLimits, import_source
from sqale_desktop.core.imports.types import (
    DAY_FIRST,
    MONTH_FIRST,
    ColumnGuess,
    TextCells,
    convert_sql,
    iso_dates_arrow,
)
from tests.core.imports.test_types import guess, guess_arrow


@pytest.mark.parametrize(
    ("cells", "kind", "layout"),
    [
        (["20.01.1979", "1.2.2000", ""], "DATE", DAY_FIRST),
        (["11/13/2024", "1/2/2024", None], "DATE", MONTH_FIRST),
        (["13/11/2024", "01/02/2024"], "DATE", DAY_FIRST),
        (["13-11-2024", "5.6.2024", "7/8/2024"], "DATE", DAY_FIRST),  # one layout, any separator
        (["03/04/2024", "12/12/2024"], "TEXT", None),  # March or April: no part above 12
        (["13/11/2024", "11/13/2024"], "TEXT", None),  # both layouts in one column: not dates
        (["01-01-13", "01-02-13"], "TEXT", None),  # two-digit years
        (["32.01.2024"], "TEXT", None),
        (["20.13.2024", "20.01.2024"], "TEXT", None),
        (["20.01.1979", "1979-01-20"], "TEXT", None),  # ISO and day-first mixed
        (["20.01.1979 10:00"], "TEXT", None),
        (["2024-01-31", "1999-12-01"], "DATE", None),  # ISO stays what it was
    ],
)
def test_dates_in_one_layout(cells: list[str | None], kind: str, layout: str | None) -> None:
    g = ColumnGuess()
    for start in range(0, len(cells), 2):
        g.update(TextCells(cells[start : start + 2]))
    assert (g.result(), g.date_layout) == (kind, layout)
    assert guess(cells) == guess_arrow(cells) == kind


def test_the_note_says_why_a_date_column_stays_text() -> None:
    ambiguous, short, clear, words = ColumnGuess(), ColumnGuess(), ColumnGuess(), ColumnGuess()
    ambiguous.update(TextCells(["03/04/2024", "05/06/2024"]))
    short.update(TextCells(["01-01-13"]))
    clear.update(TextCells(["20.01.1979"]))
    words.update(TextCells(["x"]))
    assert "day-first or month-first" in (ambiguous.note() or "")
    assert "two-digit years" in (short.note() or "")
    assert clear.note() is None and words.note() is None


def convert(cells: list[str | None], layout: str) -> list[Any]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (c)")
    conn.executemany("INSERT INTO t VALUES (?)", [(c,) for c in cells])
    sql = convert_sql("c", "DATE", False, layout)
    return [v for (v,) in conn.execute(f"SELECT {sql} FROM t ORDER BY rowid")]


dates = st.dates().filter(lambda d: d.year >= 1000)


@given(
    st.lists(dates, min_size=1, max_size=10), st.sampled_from([".", "/", "-"]), st.booleans(), st.booleans()
)
def test_both_paths_convert_to_the_same_iso_dates(
    days: list[Any], sep: str, day_first: bool, pad: bool
) -> None:
    import pyarrow as pa

    def written(d: Any) -> str:
        first, second = (d.day, d.month) if day_first else (d.month, d.day)
        fmt = "{:02d}" if pad else "{}"
        return sep.join([fmt.format(first), fmt.format(second), str(d.year)])

    cells: list[str | None] = [written(d) for d in days] + [None]
    layout = DAY_FIRST if day_first else MONTH_FIRST
    expected = [d.isoformat() for d in days] + [None]
    assert convert(cells, layout) == expected
    assert iso_dates_arrow(pa.array(cells, pa.string()), layout).to_pylist() == expected


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


@pytest.mark.parametrize("fast", [False, True])
def test_imported_dates_sort_filter_and_format(tmp_path: Path, rows: Any, fast: bool) -> None:
    path = write(
        tmp_path / "people.csv",
        "name,born,seen,when\n"
        "a,20.01.1979,11/13/2024,03/04/2024\n"
        "b,5.12.1980,1/2/2025,05/06/2024\n"
        "c,,12/31/1999,\n",
    )
    result = import_source(path, limits=ImportLimits(fast_text_bytes=0 if fast else 1 << 62))
    db = result.db_path
    types = dict(rows(db, "SELECT name, type FROM pragma_table_info('people')"))
    assert types == {"name": "TEXT", "born": "DATE", "seen": "DATE", "when": "TEXT"}
    assert rows(db, "SELECT name FROM people ORDER BY seen") == [("c",), ("a",), ("b",)]
    assert rows(db, "SELECT name FROM people WHERE born BETWEEN '1979-01-01' AND '1979-12-31'") == [("a",)]
    assert rows(db, "SELECT strftime('%Y-%m', born), born IS NULL FROM people ORDER BY rowid") == [
        ("1979-01", 0),
        ("1980-12", 0),
        (None, 1),
    ]
    assert rows(db, 'SELECT "when" FROM people ORDER BY rowid') == [("03/04/2024",), ("05/06/2024",), (None,)]
    note = [n for n in result.notes if "'when'" in n]
    assert len(note) == 1 and "day-first or month-first" in note[0]


def test_a_late_cell_that_settles_the_layout_converts_the_whole_column(tmp_path: Path, rows: Any) -> None:
    """The fast path's first guess (here 1 KB) sees only ambiguous dates: text.  A day above 12 far
    down makes the column day-first, and every row is written again as ISO."""
    lines = [f"{i},03/04/2024" for i in range(5000)] + ["5000,13/04/2024"]
    limits = ImportLimits(fast_text_bytes=0, guess_bytes=1024, block_bytes=1024)
    result = import_source(write(tmp_path / "late.csv", "id,day\n" + "\n".join(lines) + "\n"), limits=limits)
    assert rows(result.db_path, "SELECT type FROM pragma_table_info('late') WHERE name = 'day'") == [
        ("DATE",)
    ]
    assert rows(result.db_path, "SELECT day, count(*) FROM late GROUP BY day ORDER BY day") == [
        ("2024-04-03", 5000),
        ("2024-04-13", 1),
    ]
    assert not [n for n in result.notes if "day-first" in n]
