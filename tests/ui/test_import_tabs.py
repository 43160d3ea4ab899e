"""Data files open in tabs like databases: imported on the pool, named after the source, with the
import's details in the tab's tooltip, remembered by their source, and stopped by Stop."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QLabel, QTabWidget, QWidget

from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.database_tabs import DatabaseTabs
from sqale_desktop.ui.workers import TaskPool
from tests.conftest import shared_data


class Tabs:
    def __init__(self, qtbot: Any) -> None:
        self.window = QWidget()
        qtbot.addWidget(self.window)
        self.widget = QTabWidget(self.window)
        self.pool = TaskPool(max_threads=2, parent=self.window)
        self.settings = Settings()
        self.tabs = DatabaseTabs(
            self.window,
            self.widget,
            QLabel("empty", self.window),
            self.pool,
            lambda: self.settings,
            lambda: None,
        )
        self.messages: list[str] = []
        self.tabs.message.connect(self.messages.append)


@pytest.fixture
def tabs(qtbot: Any) -> Iterator[Tabs]:
    made = Tabs(qtbot)
    yield made
    made.tabs.close_all()
    assert made.pool.shutdown()
    made.tabs.release_all()


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
    qtbot: Any, tabs: Tabs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clicked with the mouse while the import is held after its first batch (not raced by size)."""
    from PySide6.QtCore import Qt

    from sqale_desktop.core.imports.progress import Meter

    source = tmp_path / "held.csv"
    source.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(50_000)), encoding="utf-8")
    held, release = threading.Event(), threading.Event()
    count = Meter.count

    def count_then_hold(self: Meter, rows: int, bytes_read: int | None = None) -> None:
        if held.is_set():
            assert release.wait(60), "the test never released the import"
        count(self, rows, bytes_read)
        held.set()

    monkeypatch.setattr(Meter, "count", count_then_hold)
    tabs.window.show()
    tabs.tabs.open_database(source)
    qtbot.waitUntil(lambda: tabs.widget.count() == 1, timeout=30_000)
    assert tabs.widget.tabText(0) == "held.csv"
    importing = tabs.widget.widget(0)
    assert not isinstance(importing, DatabasePage)
    qtbot.waitUntil(lambda: "Importing held.csv: 20,000 rows" in importing.label.text(), timeout=30_000)
    assert importing.bar.value() > 0
    with qtbot.waitSignal(tabs.tabs.open_failed, timeout=30_000) as failed:
        qtbot.mouseClick(importing.stop_button, Qt.MouseButton.LeftButton)
        release.set()
    assert "stopped; nothing was kept" in failed.args[0]
    assert tabs.widget.count() == 0
