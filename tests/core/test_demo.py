"""The generated demo shop: schema, foreign keys, determinism, regeneration, and the model card's question."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core import demo, paths

TABLES = {"suppliers", "products", "customers", "orders", "order_items", "shipments"}


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One generated database shared by the read-only tests of this module."""
    return demo.ensure_demo_database(tmp_path_factory.mktemp("demo") / "shop.sqlite")


@contextlib.contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


def scalar(conn: sqlite3.Connection, sql: str) -> Any:
    return conn.execute(sql).fetchone()[0]


def test_default_location_is_under_the_app_data_dir() -> None:
    path = demo.ensure_demo_database()
    assert path == paths.data_dir() / "demo" / "shop.sqlite"
    assert path.is_file()


def test_schema_has_the_shop_tables_and_version_pragmas(shop: Path) -> None:
    with connect(shop) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == TABLES
        assert scalar(conn, "PRAGMA user_version") == demo.DEMO_SCHEMA_VERSION
        assert scalar(conn, "PRAGMA application_id") == demo.DEMO_APPLICATION_ID
        assert scalar(conn, "PRAGMA journal_mode") == "delete"  # opens read-only without a -shm file
        item_columns = {r[1] for r in conn.execute("PRAGMA table_info(order_items)")}
        assert {"backordered", "status", "quantity", "order_id", "product_id"} <= item_columns
        shipment_columns = {r[1] for r in conn.execute("PRAGMA table_info(shipments)")}
        assert {"supplier_id", "order_item_id", "shipped_date", "delivered_date"} <= shipment_columns


def test_foreign_keys_are_declared_and_hold(shop: Path) -> None:
    with connect(shop) as conn:
        declared = {
            (table, row[3], row[2])  # (child table, child column, parent table)
            for table in TABLES
            for row in conn.execute(f"PRAGMA foreign_key_list({table})")
        }
        assert declared == {
            ("orders", "customer_id", "customers"),
            ("order_items", "order_id", "orders"),
            ("order_items", "product_id", "products"),
            ("shipments", "order_item_id", "order_items"),
            ("shipments", "supplier_id", "suppliers"),
        }
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert scalar(conn, "PRAGMA integrity_check") == "ok"


def test_enough_rows_for_real_questions(shop: Path) -> None:
    with connect(shop) as conn:
        counts = {t: scalar(conn, f"SELECT COUNT(*) FROM {t}") for t in TABLES}
    assert counts["suppliers"] >= 10
    assert counts["customers"] >= 1000
    assert counts["orders"] >= 5000
    assert counts["order_items"] >= 10000
    assert counts["shipments"] >= 10000


def test_dates_are_consistent_and_end_at_the_snapshot(shop: Path) -> None:
    as_of = demo.DEMO_AS_OF.isoformat()
    with connect(shop) as conn:
        assert scalar(conn, "SELECT MIN(order_date) FROM orders") == demo.DEMO_START.isoformat()
        assert scalar(conn, "SELECT MAX(order_date) FROM orders") <= as_of
        assert scalar(conn, "SELECT MAX(shipped_date) FROM shipments") <= as_of
        assert scalar(conn, "SELECT MAX(delivered_date) FROM shipments") <= as_of
        early = """
            SELECT COUNT(*) FROM shipments sh
            JOIN order_items oi USING (order_item_id) JOIN orders o USING (order_id)
            WHERE sh.shipped_date < o.order_date OR sh.delivered_date < sh.shipped_date
        """
        assert scalar(conn, early) == 0
        before_signup = """
            SELECT COUNT(*) FROM orders o JOIN customers c USING (customer_id)
            WHERE o.order_date < c.signup_date
        """
        assert scalar(conn, before_signup) == 0


def test_statuses_agree_with_shipments(shop: Path) -> None:
    with connect(shop) as conn:
        mismatched = """
            SELECT COUNT(*) FROM order_items oi LEFT JOIN shipments sh USING (order_item_id)
            WHERE (sh.shipment_id IS NULL) <> (oi.status IN ('processing', 'awaiting_stock', 'cancelled'))
               OR (oi.status = 'delivered') <> (sh.delivered_date IS NOT NULL)
               OR (oi.status = 'awaiting_stock' AND oi.backordered = 0)
        """
        assert scalar(conn, mismatched) == 0
        statuses = {r[0] for r in conn.execute("SELECT DISTINCT status FROM order_items")}
        assert statuses == {"processing", "awaiting_stock", "shipped", "delivered", "cancelled"}
        cancelled_orders_with_live_items = """
            SELECT COUNT(*) FROM orders o JOIN order_items oi USING (order_id)
            WHERE o.status = 'cancelled' AND oi.status <> 'cancelled'
        """
        assert scalar(conn, cancelled_orders_with_live_items) == 0


def _backordered_by_supplier(conn: sqlite3.Connection, where: str, measure: str) -> list[tuple[str, int]]:
    return conn.execute(
        f"""
        SELECT s.name, {measure} AS n
        FROM shipments sh
        JOIN suppliers s ON s.supplier_id = sh.supplier_id
        JOIN order_items oi ON oi.order_item_id = sh.order_item_id
        WHERE oi.backordered = 1 AND {where}
        GROUP BY s.supplier_id ORDER BY n DESC
        """
    ).fetchall()


def test_the_model_card_question_has_one_clear_answer(shop: Path) -> None:
    """ "Which supplier shipped the most back-ordered items last quarter?" must not be a coin toss.

    "Last quarter" is the calendar quarter of the newest shipment; the winner must lead clearly,
    whether items are counted as rows or as units, and must differ from the all-time winner (so a
    query that forgets the date filter is wrong).
    """
    with connect(shop) as conn:
        newest = date.fromisoformat(str(scalar(conn, "SELECT MAX(shipped_date) FROM shipments")))
        first_month = 3 * ((newest.month - 1) // 3) + 1
        quarter_start = date(newest.year, first_month, 1).isoformat()
        in_quarter = f"sh.shipped_date BETWEEN '{quarter_start}' AND '{newest.isoformat()}'"
        by_rows = _backordered_by_supplier(conn, in_quarter, "COUNT(*)")
        by_units = _backordered_by_supplier(conn, in_quarter, "SUM(oi.quantity)")
        all_time = _backordered_by_supplier(conn, "1", "COUNT(*)")
        reference = conn.execute(demo.DEMO_QUESTIONS[0].sql).fetchall()

    assert len(by_rows) >= 5  # many suppliers shipped back-ordered items: the ranking is not trivial
    (winner, top), (_, runner_up) = by_rows[0], by_rows[1]
    assert top >= 1.5 * runner_up and top - runner_up >= 10
    assert by_units[0][0] == winner and by_units[0][1] > by_units[1][1]
    assert all_time[0][0] != winner
    assert reference == [(winner, top)]


def test_demo_questions_have_non_empty_answers(shop: Path) -> None:
    assert len(demo.DEMO_QUESTIONS) >= 3
    with connect(shop) as conn:
        for item in demo.DEMO_QUESTIONS:
            rows = conn.execute(item.sql).fetchall()
            assert rows, item.question
            assert all(value is not None for value in rows[0]), item.question
            assert rows[0] != (0,), item.question


def test_generation_is_deterministic(tmp_path: Path, shop: Path) -> None:
    again = demo.ensure_demo_database(tmp_path / "again.sqlite")
    with connect(shop) as a, connect(again) as b:
        assert list(a.iterdump()) == list(b.iterdump())


def test_current_file_is_kept(tmp_path: Path) -> None:
    target = demo.ensure_demo_database(tmp_path / "shop.sqlite")
    with contextlib.closing(sqlite3.connect(target)) as conn, conn:
        conn.execute("CREATE TABLE marker (x)")
    assert demo.ensure_demo_database(target) == target
    with connect(target) as conn:
        assert scalar(conn, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'marker'") == 1


def test_outdated_file_is_regenerated(tmp_path: Path) -> None:
    target = demo.ensure_demo_database(tmp_path / "shop.sqlite")
    with contextlib.closing(sqlite3.connect(target)) as conn:
        conn.execute("CREATE TABLE marker (x)")
        conn.execute(f"PRAGMA user_version = {demo.DEMO_SCHEMA_VERSION + 1}")
        conn.commit()
    demo.ensure_demo_database(target)
    with connect(target) as conn:
        assert scalar(conn, "PRAGMA user_version") == demo.DEMO_SCHEMA_VERSION
        assert scalar(conn, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'marker'") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shop.sqlite"]


@pytest.mark.parametrize("content", [b"", b"not a database at all" * 100])
def test_unreadable_file_is_replaced(tmp_path: Path, content: bytes) -> None:
    target = tmp_path / "shop.sqlite"
    target.write_bytes(content)
    demo.ensure_demo_database(target)
    with connect(target) as conn:
        assert scalar(conn, "SELECT COUNT(*) FROM suppliers") == len(demo._SUPPLIERS)


def test_failed_generation_keeps_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "shop.sqlite"
    target.write_bytes(b"old")

    def half_written(path: Path) -> None:
        path.write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(demo, "write_demo_database", half_written)
    with pytest.raises(OSError, match="disk full"):
        demo.ensure_demo_database(target)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["shop.sqlite"]


def test_script_entry_writes_the_database(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "out.sqlite"
    command = [sys.executable, "-m", "sqale_desktop.core.demo", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)
    with connect(out) as conn:
        assert scalar(conn, "PRAGMA user_version") == demo.DEMO_SCHEMA_VERSION
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
