"""A large CSV's first rows are on screen while the rest imports: the importing tab shows them in a
read-only grid under its progress bar, and the database page replaces the tab once it is done."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView

from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.database_tabs import _ImportingTab
from tests.ui.import_tabs import Tabs, stop_by_mouse


def _cells(view: QAbstractItemView, rows: int) -> list[list[str]]:
    model = view.model()
    return [
        [model.index(r, c).data(Qt.ItemDataRole.DisplayRole) for c in range(model.columnCount())]
        for r in range(rows)
    ]


def test_the_first_rows_show_while_the_rest_imports(
    qtbot: Any, tabs: Tabs, tmp_path: Path, held_import: threading.Event
) -> None:
    source = tmp_path / "orders.csv"
    source.write_text(
        "order_id;customer;total\n" + "".join(f"{i};Kunde {i};{i},50\n" for i in range(60_000)),
        encoding="utf-8",
    )
    tabs.window.show()
    tabs.tabs.open_database(source)
    qtbot.waitUntil(lambda: tabs.widget.count() == 1, timeout=30_000)
    importing = tabs.widget.widget(0)
    assert isinstance(importing, _ImportingTab)
    qtbot.waitUntil(lambda: importing.preview.isVisible(), timeout=30_000)
    grid = importing.preview
    model = grid.model()
    assert [model.headerData(c, Qt.Orientation.Horizontal) for c in range(3)] == [
        "order_id",
        "customer",
        "total",
    ]
    assert _cells(grid, 3) == [["0", "Kunde 0", "0,50"], ["1", "Kunde 1", "1,50"], ["2", "Kunde 2", "2,50"]]
    assert model.rowCount() == 200
    assert importing.preview_label.text() == "Preview of the first 200 rows — importing the rest…"
    assert grid.editTriggers() == QAbstractItemView.EditTrigger.NoEditTriggers
    assert importing.stop_button.isVisible()  # still importing: Stop is still there

    with qtbot.waitSignal(tabs.tabs.opened, timeout=60_000):
        held_import.set()
    assert tabs.widget.count() == 1
    page = tabs.widget.widget(0)
    assert isinstance(page, DatabasePage)
    assert tabs.widget.tabText(0) == "orders.csv"


def test_stop_takes_the_preview_away_with_the_tab(
    qtbot: Any, tabs: Tabs, tmp_path: Path, held_import: threading.Event
) -> None:
    source = tmp_path / "big.csv"
    source.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(60_000)), encoding="utf-8")
    tabs.window.show()
    tabs.tabs.open_database(source)
    qtbot.waitUntil(lambda: tabs.widget.count() == 1, timeout=30_000)
    importing = tabs.widget.widget(0)
    assert isinstance(importing, _ImportingTab)
    qtbot.waitUntil(lambda: importing.preview.isVisible(), timeout=30_000)
    stop_by_mouse(qtbot, tabs, importing, held_import)


def test_the_preview_brings_the_tab_up_before_the_import_reports_anything(
    qtbot: Any, tabs: Tabs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1 GB file's checksum and first batch take seconds before the first progress report; the
    first rows must not wait for them.  Here the import reports nothing until released."""
    import sqale_desktop.ui.database_tabs as database_tabs

    release = threading.Event()
    resolve = database_tabs.resolve_database

    def silent_then_resolve(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(60), "the test never released the import"
        return resolve(*args, **kwargs)

    monkeypatch.setattr(database_tabs, "resolve_database", silent_then_resolve)
    source = tmp_path / "sales.csv"
    source.write_text("region,amount\n" + "".join(f"North {i},{i}\n" for i in range(5_000)), encoding="utf-8")
    tabs.window.show()
    try:
        tabs.tabs.open_database(source)
        qtbot.waitUntil(lambda: tabs.widget.count() == 1, timeout=30_000)
        importing = tabs.widget.widget(0)
        assert isinstance(importing, _ImportingTab)
        qtbot.waitUntil(lambda: importing.preview.isVisible(), timeout=30_000)
        assert _cells(importing.preview, 2) == [["North 0", "0"], ["North 1", "1"]]
        with qtbot.waitSignal(tabs.tabs.opened, timeout=60_000):
            release.set()
    finally:
        release.set()
    assert isinstance(tabs.widget.widget(0), DatabasePage)
