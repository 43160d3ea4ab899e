"""The SQL panel's Format button, clicked: the query returns the same headers and rows after it
(sqlparse's upper-casing made ``AS first`` a ``FIRST`` header and ``count( * )`` a ``COUNT(*)``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from sqale_desktop.core.db.connection import open_readonly
from sqale_desktop.core.db.introspect import load_schema
from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.workers import TaskPool

QUERY = (
    "select FirstName as first, LastName last, strftime('%Y', BirthDate) as year, "
    "count( * ), case when Title like '%Manager%' then 1 else 0 end as level "
    "from Employee group by EmployeeId order by year, first"
)


def test_format_keeps_headers_and_rows(qtbot: Any, chinook: Path) -> None:
    pool = TaskPool()
    db = open_readonly(chinook)
    page = DatabasePage(db, load_schema(db), pool)
    qtbot.addWidget(page)
    try:

        def run() -> tuple[list[str], list[Any]]:
            with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
                page.sql.run()
            model = page.sql.model
            assert model is not None
            return model.columns, [tuple(r) for r in model.loaded_rows]

        page.sql.editor.set_sql(QUERY)
        before = run()
        assert before[0] == ["first", "last", "year", "count( * )", "level"]
        qtbot.mouseClick(page.sql.format_button, Qt.MouseButton.LeftButton)
        assert page.sql.editor.sql() != QUERY and page.sql.editor.sql().startswith(
            "SELECT FirstName AS first,"
        )
        assert run() == before
    finally:
        page.close_database()
        assert pool.shutdown()
        page.release()
