"""The grid's model: paging, display of NULL/BLOB, sorting, TSV copy; checked by qtmodeltester."""

from __future__ import annotations

import csv
import io
import sqlite3
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PySide6.QtCore import QModelIndex, Qt

from sqale_desktop.core.export_formats import platform_newline
from sqale_desktop.ui.result_model import PAGE_SIZE, ResultTableModel, display_value, tsv_value


class SqliteCursor:
    """The smallest cursor with the core QueryCursor's paging surface, over a plain sqlite3 cursor."""

    def __init__(self, conn: sqlite3.Connection, sql: str) -> None:
        self._cur = conn.execute(sql)
        self.columns = [d[0] for d in self._cur.description]
        self.exhausted = False

    def fetch_page(self, n: int) -> Sequence[Sequence[Any]]:
        rows = self._cur.fetchmany(n)
        if len(rows) < n:
            self.exhausted = True
        return rows


@pytest.fixture
def numbers() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (i INTEGER, s TEXT, b BLOB)")
    conn.executemany(
        "INSERT INTO t VALUES (?, ?, ?)",
        [(i, None if i % 7 == 0 else f"row {i}", b"\x00\x01" if i % 5 == 0 else None) for i in range(1234)],
    )
    return conn


def test_model_pages_500_rows_at_a_time(qtmodeltester: Any, numbers: sqlite3.Connection) -> None:
    cursor = SqliteCursor(numbers, "SELECT * FROM t ORDER BY i")
    model = ResultTableModel(cursor, cursor.fetch_page(PAGE_SIZE))
    assert model.rowCount() == 500
    assert model.canFetchMore()
    model.fetchMore()
    assert model.rowCount() == 1000
    model.fetchMore()
    assert model.rowCount() == 1234
    assert not model.canFetchMore()
    qtmodeltester.check(model)
    expected = numbers.execute("SELECT * FROM t ORDER BY i").fetchall()
    got = [
        tuple(model.data(model.index(r, c), Qt.ItemDataRole.UserRole) for c in range(3))
        for r in range(model.rowCount())
    ]
    assert got == expected


def test_null_and_blob_read_differently_from_text() -> None:
    assert display_value(None) == "NULL"
    assert display_value(b"\x00\x01\x02") == "<blob 3 bytes>"
    assert display_value("NULL") == "NULL"  # the text, same letters: told apart by the model's font/colour
    assert display_value("x" * 500).endswith("…")
    assert tsv_value(None) == ""
    assert tsv_value(b"\xab") == "X'AB'"


def test_null_cells_are_styled_apart_from_text(numbers: sqlite3.Connection) -> None:
    cursor = SqliteCursor(numbers, "SELECT s FROM t WHERE i IN (0, 1) ORDER BY i")
    model = ResultTableModel(cursor, cursor.fetch_page(PAGE_SIZE))
    null_font = model.data(model.index(0, 0), Qt.ItemDataRole.FontRole)
    text_font = model.data(model.index(1, 0), Qt.ItemDataRole.FontRole)
    assert null_font is not None and null_font.italic()
    assert text_font is None


def test_sort_in_memory_when_complete(qtmodeltester: Any, numbers: sqlite3.Connection) -> None:
    cursor = SqliteCursor(numbers, "SELECT i, s FROM t WHERE i < 30")
    model = ResultTableModel(cursor, cursor.fetch_page(PAGE_SIZE))
    assert model.complete
    model.sort(1, Qt.SortOrder.AscendingOrder)
    values = [model.data(model.index(r, 1), Qt.ItemDataRole.UserRole) for r in range(model.rowCount())]
    nulls = [v for v in values if v is None]
    assert values[: len(nulls)] == nulls  # NULL first, as SQLite orders
    assert values[len(nulls) :] == sorted(v for v in values if v is not None)
    qtmodeltester.check(model)


def test_sort_asks_for_a_rerun_when_rows_remain(qtbot: Any, numbers: sqlite3.Connection) -> None:
    cursor = SqliteCursor(numbers, "SELECT * FROM t")
    model = ResultTableModel(cursor, cursor.fetch_page(PAGE_SIZE))
    with qtbot.waitSignal(model.resort_requested) as blocker:
        model.sort(0, Qt.SortOrder.DescendingOrder)
    assert blocker.args == [0, Qt.SortOrder.DescendingOrder]
    assert model.data(model.index(0, 0), Qt.ItemDataRole.UserRole) == 0  # untouched


def test_range_copy_is_tsv(numbers: sqlite3.Connection) -> None:
    cursor = SqliteCursor(numbers, "SELECT i, s, b FROM t WHERE i IN (5, 6) ORDER BY i")
    model = ResultTableModel(cursor, cursor.fetch_page(PAGE_SIZE))
    indexes: list[QModelIndex] = [model.index(r, c) for r in range(2) for c in range(3)]
    end = platform_newline()  # LF on Linux and macOS, CRLF on Windows
    assert model.tsv(indexes, with_header=True) == f"i\ts\tb{end}5\trow 5\tX'0001'{end}6\trow 6\t"


@given(
    st.lists(
        st.lists(
            st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.text(), st.binary(max_size=8)),
            min_size=2,
            max_size=2,
        ),
        min_size=1,
        max_size=6,
    )
)
@settings(max_examples=60, deadline=None)
def test_tsv_copy_reads_back_with_the_csv_module(rows: list[list[Any]]) -> None:
    model = ResultTableModel(None, rows, columns=["a", "b"])
    indexes = [model.index(r, c) for r in range(len(rows)) for c in range(2)]
    text = model.tsv(indexes, with_header=True)
    back = list(csv.reader(io.StringIO(text + platform_newline(), newline=""), dialect="excel-tab"))
    assert back[0] == ["a", "b"]
    assert back[1:] == [[tsv_value(v) for v in row] for row in rows]


def test_money_reads_to_15_digits_and_copies_exactly() -> None:
    """Chinook's invoice totals summed per country: the grid shows 523.06, the clipboard keeps the double."""
    conn = sqlite3.connect(":memory:")
    row = conn.execute("SELECT 'USA', 523.0600000000003, 303.9599999999999, 2.5").fetchone()
    model = ResultTableModel(None, [row], columns=["country", "revenue", "other", "plain"])
    shown = [model.index(0, c).data() for c in range(4)]
    assert shown == ["USA", "523.06", "303.96", "2.5"]
    assert model.index(0, 2).data(Qt.ItemDataRole.UserRole) == 303.9599999999999
    assert model.index(0, 2).data(Qt.ItemDataRole.ToolTipRole) == "Stored value: 303.9599999999999"
    assert model.index(0, 3).data(Qt.ItemDataRole.ToolTipRole) is None  # nothing was rounded
    indexes = [model.index(0, c) for c in range(4)]
    assert model.tsv(indexes) == "USA\t523.0600000000003\t303.9599999999999\t2.5"
