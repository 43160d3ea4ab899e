"""A folder of CSVs is one database, and the keys its data shows become declared foreign keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.imports import import_source
from sqale_desktop.core.tools import ToolBox


def shop(folder: Path) -> Path:
    folder.mkdir()
    (folder / "customers.csv").write_text("id,name\n1,Ada\n2,Grace\n3,Linus\n", encoding="utf-8")
    (folder / "orders.csv").write_text(
        "order_id,customer_id,total\n10,1,9.5\n11,1,3\n12,3,7.25\n13,,1\n", encoding="utf-8"
    )
    (folder / "order_items.csv").write_text("order_id,sku,qty\n10,A,1\n10,B,2\n12,A,1\n", encoding="utf-8")
    # user_id values are not all users' ids: the name alone is not enough
    (folder / "users.csv").write_text("id,login\n1,ada\n2,grace\n", encoding="utf-8")
    (folder / "visits.csv").write_text("user_id,page\n1,/\n7,/about\n", encoding="utf-8")
    (folder / "README.md").write_text("not data", encoding="utf-8")
    return folder


def test_keys_are_inferred_when_names_and_values_agree(tmp_path: Path, rows: Any) -> None:
    result = import_source(shop(tmp_path / "shop"))
    assert result.summary == "shop/ — 5 files imported as 5 tables"
    keys = rows(
        result.db_path,
        'SELECT m.name, f."from", f."table", f."to" FROM sqlite_master m, '
        "pragma_foreign_key_list(m.name) f WHERE m.type = 'table' ORDER BY 1, 2",
    )
    assert keys == [
        ("order_items", "order_id", "orders", "order_id"),
        ("orders", "customer_id", "customers", "id"),
    ]
    assert any(
        fk.startswith("orders.customer_id → customers.id: the name 'customer_id' points to customers")
        for fk in result.foreign_keys
    )
    # the parent keys are UNIQUE, so the keys are valid ones
    assert rows(result.db_path, "PRAGMA foreign_key_check") == []


def test_join_path_works_through_an_inferred_key(tmp_path: Path) -> None:
    result = import_source(shop(tmp_path / "shop"))
    with open_readonly(result.db_path) as db:
        box = ToolBox(db)
        path = box.call("join_path", {"table_a": "order_items", "table_b": "customers"})
        assert path.ok, path.text
        assert "orders" in path.text and "customer_id" in path.text
        described = box.call("describe_table", {"table_name": "orders"})
        assert "REFERENCES" in described.text or "customers" in described.text


def test_renamed_columns_keep_their_original_names(tmp_path: Path, rows: Any) -> None:
    path = tmp_path / "odd.csv"
    path.write_text('id,,Name,name,"two\nlines"\n1,a,b,c,d\n', encoding="utf-8")
    result = import_source(path)
    sql = rows(result.db_path, "SELECT sql FROM sqlite_master WHERE name = 'odd'")[0][0]
    assert "\"column_2\" TEXT, -- original name: ''" in sql
    assert "\"name_2\" TEXT, -- original name: 'name'" in sql
    assert "\"two lines\" TEXT -- original name: 'two\\nlines'" in sql
    assert rows(
        result.db_path, "SELECT column_name, original_name FROM _columns WHERE table_name = 'odd'"
    ) == [("id", "id"), ("column_2", ""), ("Name", "Name"), ("name_2", "name"), ("two lines", "two\nlines")]
