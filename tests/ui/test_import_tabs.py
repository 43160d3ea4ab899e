"""Data files open in tabs like databases: imported on the pool, named after the source, with the
import's details in the tab's tooltip, remembered by their source, and stopped by Stop."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqale_desktop.ui.database_page import DatabasePage
from tests.helpers import shared_data
from tests.ui.import_tabs import Tabs, stop_by_mouse


def test_a_workbook_opens_in_a_tab_named_after_it(qtbot: Any, tabs: Tabs) -> None:
    book = shared_data("files/excel/csvkit__sheets.xlsx")
    with qtbot.waitSignal(tabs.tabs.opened, timeout=30_000):
        tabs.tabs.open_database(book)
    assert tabs.widget.tabText(0) == "csvkit__sheets.xlsx"
    assert tabs.widget.tabToolTip(0).startswith("csvkit__sheets.xlsx — 2 sheets imported as tables")
    assert tabs.settings.open_databases == [str(book)]
    assert "csvkit__sheets.xlsx — 2 sheets imported as tables" in tabs.messages
    tabs.tabs.open_database(book)  # already open: brought to the front, not imported again
    assert tabs.widget.count() == 1


def test_stop_while_importing_keeps_nothing(qtbot: Any, tabs: Tabs, tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    big.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(200_000)), encoding="utf-8")
    with qtbot.waitSignal(tabs.tabs.open_failed, timeout=30_000) as failed:
        tabs.tabs.open_database(big)
        tabs.tabs.stop_opening()
    assert "stopped; nothing was kept" in failed.args[0]
    assert tabs.widget.count() == 0


def test_the_importing_tab_shows_progress_and_its_stop_button_stops(
    qtbot: Any, tabs: Tabs, tmp_path: Path, held_import: threading.Event
) -> None:
    """Clicked with the mouse while the import is held after its first batch (not raced by size)."""
    source = tmp_path / "held.csv"
    source.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(50_000)), encoding="utf-8")
    tabs.window.show()
    tabs.tabs.open_database(source)
    qtbot.waitUntil(lambda: tabs.widget.count() == 1, timeout=30_000)
    assert tabs.widget.tabText(0) == "held.csv"
    importing = tabs.widget.widget(0)
    assert not isinstance(importing, DatabasePage)
    qtbot.waitUntil(lambda: "Importing held.csv: 20,000 rows" in importing.label.text(), timeout=30_000)
    assert importing.bar.value() > 0
    stop_by_mouse(qtbot, tabs, importing, held_import)


def test_a_large_csv_on_the_fast_path_shows_progress_and_stops_by_mouse(
    qtbot: Any, tabs: Tabs, tmp_path: Path, held_import: threading.Event
) -> None:
    """Past the fast_text_bytes limit: pyarrow and the ADBC writer run in threads of their own, the
    import's thread reports their progress and sees Stop; the cache keeps nothing."""
    import re

    from sqale_desktop.core import paths
    from sqale_desktop.core.imports import ImportLimits

    source = tmp_path / "big.csv"
    source.write_text(
        "id,name,score\n" + "".join(f"{i},name {i},{i / 4}\n" for i in range(400_000)), encoding="utf-8"
    )
    assert source.stat().st_size >= ImportLimits().fast_text_bytes
    tabs.window.show()
    tabs.tabs.open_database(source)
    qtbot.waitUntil(lambda: tabs.widget.count() == 1, timeout=30_000)
    importing = tabs.widget.widget(0)
    assert not isinstance(importing, DatabasePage)
    shown = re.compile(r"Importing big\.csv: [1-9][\d,]* rows")  # waitUntil takes None for yes
    qtbot.waitUntil(lambda: shown.search(importing.label.text()) is not None, timeout=30_000)
    assert importing.bar.value() > 0
    stop_by_mouse(qtbot, tabs, importing, held_import)
    assert [p for p in (paths.cache_dir() / "imports").rglob("*") if p.is_file()] == []
