"""The type guess: a column is a number, a boolean or a date only when every cell is one."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqale_desktop.core.imports.types import ArrowCells, ColumnGuess, TextCells, convert_sql


def guess(cells: list[str | None], comma: bool = False, batch: int = 2) -> str:
    g = ColumnGuess(comma)
    for start in range(0, len(cells), batch):
        g.update(TextCells(cells[start : start + batch]))
    return g.result()


@pytest.mark.parametrize(
    ("cells", "kind"),
    [
        (["1", "2", "", None, "-3"], "INTEGER"),
        (["1", "2.5", "1e3", ".5"], "REAL"),
        (["01", "2"], "TEXT"),  # a leading zero: an identifier
        (["9223372036854775807"], "INTEGER"),
        (["9223372036854775808"], "TEXT"),  # past 64 bits: exact only as text
        (["12345678901234567890", "1.5"], "TEXT"),
        (["true", "False", "TRUE"], "BOOLEAN"),
        (["2024-01-31", "1999-12-01"], "DATE"),
        (["2024-01-31", "2024-01-31 12:30:00", "2024-02-01T01:02:03Z"], "DATETIME"),
        (["12:30", "23:59:59"], "TIME"),
        (["2024-13-01"], "TEXT"),
        (["1", "two"], "TEXT"),
        (["", None], "TEXT"),
        (["1\n2"], "TEXT"),
        ([" 1"], "TEXT"),
        (["inf", "nan"], "TEXT"),
    ],
)
def test_guess(cells: list[str | None], kind: str) -> None:
    assert guess(cells) == kind


def guess_arrow(cells: list[str | None], comma: bool = False, batch: int = 2) -> str:
    """The same guess over Arrow arrays (the fast CSV path), empty cells null as pyarrow reads them."""
    import pyarrow as pa

    g = ColumnGuess(comma)
    for start in range(0, len(cells), batch):
        g.update(ArrowCells(pa.array([c or None for c in cells[start : start + batch]], pa.string())))
    return g.result()


@pytest.mark.parametrize(
    ("cells", "comma"),
    [
        (["1", "2", "", None, "-3"], False),
        (["1", "2.5", "1e3", ".5"], False),
        (["01", "2"], False),
        (["9223372036854775807", "1"], False),
        (["9223372036854775808"], False),
        (["12345678901234567890", "1.5"], False),
        (["1234567890123456", "1"], False),
        (["true", "False", "TRUE"], False),
        (["2024-01-31", "1999-12-01"], False),
        (["2024-01-31", "2024-01-31 12:30:00", "2024-02-01T01:02:03Z"], False),
        (["12:30", "23:59:59"], False),
        (["2024-13-01"], False),
        (["1", "two"], False),
        (["", None], False),
        (["1\n2"], False),
        ([" 1"], False),
        (["inf", "nan"], False),
        (["0,5", "12", "3,25"], True),
        (["0,5", "1.5"], True),
        (["1,5", "2"], False),
    ],
)
def test_the_arrow_guess_is_the_same_guess(cells: list[str | None], comma: bool) -> None:
    assert guess_arrow(cells, comma) == guess(cells, comma)


@given(
    st.lists(
        st.one_of(
            st.from_regex(r"-?[0-9]{1,20}(\.[0-9]{0,3})?", fullmatch=True),
            st.from_regex(r"[-+ ]?(0x)?[0-9]{0,3}[.,]?[0-9]{0,3}([eE][-+]?[0-9]{1,4})?", fullmatch=True),
            st.from_regex(r"[0-9]{1,3}[./-][0-9]{1,3}[./-][0-9]{1,5}", fullmatch=True),  # dates, or not
            st.sampled_from(
                [
                    *("", "true", "TRUE", "2024-02-30", "2024-02-29", "0000-01-01", "2024-1-05", "12:61"),
                    *("1e5", "0,5", "x", "-0", "00", "-00", "0.5", "-0.5", "05.5", "inf", "nan"),
                    *("0x10", " 1", "+1"),
                ]
            ),
        ),
        min_size=1,
        max_size=12,
    ),
    st.booleans(),
)
def test_the_arrow_guess_agrees_on_any_cells(cells: list[str], comma: bool) -> None:
    assert guess_arrow(cells, comma, batch=3) == guess(cells, comma, batch=3)


def test_decimal_commas_only_where_the_file_says_so() -> None:
    assert guess(["0,5", "12", "3,25"], comma=True) == "REAL"
    assert guess(["0,5", "12"], comma=False) == "TEXT"
    assert guess(["0,5", "1.5"], comma=True) == "TEXT"  # both separators: not one number format


@given(st.lists(st.one_of(st.integers(-(2**63) + 1, 2**63 - 1).map(str), st.just("")), min_size=1))
def test_integer_columns_convert_exactly(cells: list[str]) -> None:
    kind = guess(cells, batch=3)
    if not any(cells):
        assert kind == "TEXT"
        return
    assert kind == "INTEGER"
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE s (c0)")
    conn.executemany("INSERT INTO s VALUES (?)", [(c,) for c in cells])
    got = [v for (v,) in conn.execute(f"SELECT {convert_sql('c0', kind, False)} FROM s")]
    conn.close()
    assert got == [int(c) if c else None for c in cells]


@given(st.lists(st.text(max_size=8), min_size=1, max_size=20))
def test_text_is_kept_as_written(cells: list[str]) -> None:
    kind = guess(cells)
    if kind != "TEXT":
        return
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE s (c0)")
    conn.executemany("INSERT INTO s VALUES (?)", [(c,) for c in cells])
    got = [v for (v,) in conn.execute(f"SELECT {convert_sql('c0', kind, False)} FROM s")]
    conn.close()
    assert got == [c or None for c in cells]
