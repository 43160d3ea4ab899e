"""DatabaseTabs alone: tabs open on the pool, close, and are remembered in the settings."""

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
from tests.helpers import shared_data


class Harness:
    def __init__(self, qtbot: Any) -> None:
        self.window = QWidget()
        qtbot.addWidget(self.window)
        self.tab_widget = QTabWidget(self.window)
        self.empty = QLabel("empty", self.window)
        self.pool = TaskPool(max_threads=2, parent=self.window)
        self.settings = Settings()
        self.saved: list[list[str]] = []
        self.tabs = DatabaseTabs(
            self.window, self.tab_widget, self.empty, self.pool, lambda: self.settings, self._save
        )
        self.signals: list[tuple[str, Any]] = []
        self.tabs.page_created.connect(lambda page: self.signals.append(("created", page)))
        self.tabs.opened.connect(lambda page, schema: self.signals.append(("opened", page)))
        self.tabs.closing.connect(lambda page: self.signals.append(("closing", page)))
        self.tabs.error.connect(lambda text: self.signals.append(("error", text)))
        self.tabs.open_failed.connect(lambda text: self.signals.append(("open_failed", text)))
        self.tabs.message.connect(lambda text: self.signals.append(("message", text)))

    def _save(self) -> None:
        self.saved.append(list(self.settings.open_databases))

    def open(self, qtbot: Any, path: Path) -> DatabasePage:
        with qtbot.waitSignal(self.tabs.opened, timeout=10_000) as blocker:
            self.tabs.open_database(path)
        page = blocker.args[0]
        assert isinstance(page, DatabasePage)
        return page

    def shutdown(self) -> None:
        self.tabs.close_all()
        assert self.pool.shutdown()
        self.tabs.release_all()


@pytest.fixture
def harness(qtbot: Any) -> Iterator[Harness]:
    made = Harness(qtbot)
    yield made
    made.shutdown()


def test_a_tab_opens_once_and_is_remembered(qtbot: Any, harness: Harness, chinook: Path) -> None:
    page = harness.open(qtbot, chinook)
    # The window connects to the page before it is shown, and hears of it once it is in its tab.
    assert [name for name, _ in harness.signals] == ["message", "created", "opened"]
    assert harness.signals[0][1] == f"Opening {chinook.name}…"
    assert harness.tabs.pages() == [page] and harness.tabs.current_page() is page
    assert harness.tab_widget.tabText(0) == chinook.name and harness.empty.isHidden()
    assert harness.settings.recent_databases == [str(chinook)]
    assert harness.saved[-1] == [str(chinook)] and harness.settings.active_database == str(chinook)
    assert [a.text() for a in harness.tabs.recent_menu.actions()] == [str(chinook)]
    # The same file again (another spelling of it) is brought to the front, not opened twice.
    harness.signals.clear()
    harness.tabs.open_database(chinook.parent / "." / chinook.name)
    assert harness.signals == [] and len(harness.tabs.pages()) == 1


def test_closing_a_tab_says_so_first_and_forgets_it(qtbot: Any, harness: Harness, chinook: Path) -> None:
    page = harness.open(qtbot, chinook)
    harness.signals.clear()
    harness.tabs.close_tab(0)
    assert harness.signals == [("closing", page)]
    assert harness.tabs.pages() == [] and not harness.empty.isHidden()
    assert harness.settings.open_databases == [] and harness.saved[-1] == []
    assert harness.settings.recent_databases == [str(chinook)]  # still in Open Recent


def test_a_file_that_cannot_open_is_reported_for_the_banner_then_as_failed(
    qtbot: Any, harness: Harness, tmp_path: Path
) -> None:
    bad = tmp_path / "not-a-database.sqlite"
    bad.write_bytes(b"this is not SQLite" * 100)
    with qtbot.waitSignal(harness.tabs.open_failed, timeout=10_000):
        harness.tabs.open_database(bad)
    names = [name for name, _ in harness.signals]
    assert names == ["message", "error", "open_failed"]
    assert harness.signals[1][1].startswith(f"Could not open {bad.name}: ")
    assert harness.tabs.pages() == [] and harness.settings.recent_databases == []


def test_closing_the_window_keeps_the_open_tabs_for_next_time(
    qtbot: Any, harness: Harness, chinook: Path, northwind: Path
) -> None:
    harness.open(qtbot, chinook)
    harness.open(qtbot, northwind)
    saves = len(harness.saved)
    harness.tabs.close_all()
    harness.tabs.close_tab(0)
    assert harness.settings.open_databases == [str(chinook), str(northwind)]
    assert len(harness.saved) == saves


def test_the_tab_the_agent_works_in_is_marked_and_the_others_say_why_ask_waits(
    qtbot: Any, harness: Harness, chinook: Path, northwind: Path
) -> None:
    first, second = harness.open(qtbot, chinook), harness.open(qtbot, northwind)
    harness.tabs.show_agent_state(first, has_engine=True)
    assert [harness.tab_widget.tabText(i) for i in range(2)] == [f"● {chinook.name}", northwind.name]
    assert harness.tab_widget.tabToolTip(0) == f"{chinook}\nThe agent is working here."
    assert not second.chat.ask_button.isEnabled() and not second.chat.watch_button.isEnabled()
    assert second.chat.ask_button.toolTip() == (
        f"Ask waits: the agent is answering in {chinook.name} (tab 1). Stop it there or wait for its answer."
    )
    harness.tabs.show_agent_state(None, has_engine=False)
    assert [harness.tab_widget.tabText(i) for i in range(2)] == [chinook.name, northwind.name]
    assert second.chat.watch_button.isEnabled() and not second.chat.ask_button.isEnabled()
    assert second.chat.live.text() == "No model installed: Tools → Model Manager… downloads one."
    harness.tabs.show_agent_state(None, has_engine=True)
    assert first.chat.ask_button.isEnabled() and second.chat.ask_button.isEnabled()


def test_a_new_query_deadline_reaches_both_handles_of_every_tab(
    qtbot: Any, harness: Harness, chinook: Path, northwind: Path
) -> None:
    pages = [harness.open(qtbot, chinook), harness.open(qtbot, northwind)]
    harness.tabs.set_query_time_limit(2.5)
    assert [(page.db.time_limit_s, page.sql.db.time_limit_s) for page in pages] == [(2.5, 2.5)] * 2


def tab_texts(harness: Harness) -> list[str]:
    return [harness.tab_widget.tabText(i) for i in range(harness.tab_widget.count())]


def test_a_relative_path_is_remembered_absolute(
    qtbot: Any, harness: Harness, chinook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32, item 1: named relative to the folder the app runs in, remembered absolute."""
    monkeypatch.chdir(chinook.parent)
    page = harness.open(qtbot, Path("chinook.sqlite"))
    assert page.source.is_absolute() and page.source == chinook
    assert harness.settings.open_databases == [str(chinook)]
    assert harness.settings.recent_databases == [str(chinook)]
    assert harness.settings.active_database == str(chinook)


def test_tabs_stand_in_the_order_asked_and_one_that_ends_late_takes_no_front(
    qtbot: Any, harness: Harness, chinook: Path, held_import: threading.Event
) -> None:
    """Issue 32, item 1: a CSV asked for first is still importing (held) when chinook, asked for
    next, opens: once the CSV's import ends its tab stands first, and chinook stays in front."""
    source = shared_data("files/csv/fivethirtyeight__state_legislative_district_analysis.csv")
    harness.tabs.open_database(source)
    chinook_page = harness.open(qtbot, chinook)
    assert harness.tabs.current_page() is chinook_page
    with qtbot.waitSignal(harness.tabs.opened, timeout=30_000) as opened:
        held_import.set()
    assert tab_texts(harness) == [source.name, chinook.name]
    assert harness.tabs.current_page() is chinook_page and opened.args[0] is harness.tabs.pages()[0]
    assert harness.settings.open_databases == [str(source), str(chinook)]
    assert harness.settings.active_database == str(chinook)


def test_restored_tabs_keep_their_order_and_front_tab_while_one_still_imports(
    qtbot: Any, harness: Harness, chinook: Path, northwind: Path, held_import: threading.Event
) -> None:
    """Issue 32, item 1: last session's CSV, chinook (in front) and northwind; the CSV's import is
    held while the others open.  Meanwhile what is saved still holds all three and chinook in
    front (a quit now loses nothing); at the end the tabs stand as they did, chinook in front."""
    source = shared_data("files/csv/fivethirtyeight__state_legislative_district_analysis.csv")
    harness.settings.open_databases = [str(source), str(chinook), str(northwind)]
    harness.settings.active_database = str(chinook)
    assert harness.tabs.restore_tabs() == 3
    qtbot.waitUntil(lambda: len(harness.tabs.pages()) == 2, timeout=30_000)
    assert [p.display_name for p in harness.tabs.pages()] == [chinook.name, northwind.name]
    assert harness.tabs.current_page() is harness.tabs.pages()[0]
    assert harness.saved[-1] == [str(source), str(chinook), str(northwind)]
    assert harness.settings.active_database == str(chinook)
    with qtbot.waitSignal(harness.tabs.opened, timeout=30_000):
        held_import.set()
    assert tab_texts(harness) == [source.name, chinook.name, northwind.name]
    assert harness.tabs.current_page() is harness.tabs.pages()[1]
    assert harness.settings.open_databases == [str(source), str(chinook), str(northwind)]
    assert harness.settings.active_database == str(chinook)


def test_several_files_chosen_at_once_open_in_that_order_the_last_in_front(
    qtbot: Any, harness: Harness, chinook: Path, northwind: Path, sakila: Path
) -> None:
    harness.tabs.open_databases([sakila, chinook, northwind])
    qtbot.waitUntil(lambda: len(harness.tabs.pages()) == 3, timeout=30_000)
    assert tab_texts(harness) == [sakila.name, chinook.name, northwind.name]
    assert harness.tabs.current_page() is harness.tabs.pages()[2]


def test_a_restored_workbook_that_crashes_its_importer_is_a_message_and_not_restored_again(
    qtbot: Any, harness: Harness, tmp_path: Path
) -> None:
    """Issue 30: last session's only tab was a workbook since replaced by one that makes calamine
    abort.  The start survives it (the importer is a child), the banner names the file, and the
    workbook is no longer among the tabs to restore, so the next start does not meet it again."""
    from tests.hostile_files import far_corner_workbook

    book = far_corner_workbook(tmp_path / "regional_sales.xlsx")
    harness.settings.open_databases = [str(book)]
    harness.settings.active_database = str(book)
    with qtbot.waitSignal(harness.tabs.open_failed, timeout=60_000):
        assert harness.tabs.restore_tabs() == 1
    errors = [text for kind, text in harness.signals if kind == "error"]
    assert len(errors) == 1 and "regional_sales.xlsx" in errors[0]
    assert harness.settings.open_databases == []
    assert harness.tabs.pages() == []
