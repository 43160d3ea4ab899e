"""Issue 32, items 1, 3 and 5, as a person meets them: files named relative to one folder come back
from another, in their order, with the tab that was in front; File → Open Folder… and a
multi-file Ctrl+O; a data file is named after itself everywhere, and its stored conversation
reopens it (imported again once it changed), never the copy in the cache.

Each journey starts the app through ``run_app`` or the ``sqale-desktop`` process with a real
settings folder, presses the keys and clicks the buttons a person would (the native file dialogs
alone are answered for them), and relaunches where a person relaunches.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QFileDialog

from sqale_desktop.core import paths
from sqale_desktop.ui.app import QUIT_AFTER_SHOWN_ENV
from tests.commands.subprocess_cli import run_cli
from tests.helpers import REPO_ROOT, SHARED_DATA, shared_data
from tests.ui.windows import grid_rows

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
WORKBOOK = "excel/csvkit__sheets.xlsx"
CSV = "csv/frictionless__table-with-accents.csv"
DATABASE = "../sample/chinook.sqlite"


def wait_tabs(qtbot: Any, window: Any, count: int) -> None:
    qtbot.waitUntil(lambda: len(window.pages()) == count and not window.databases.opening, timeout=60_000)


def tab_names(window: Any) -> list[str]:
    return [window.tabs.tabText(i) for i in range(window.tabs.count())]


def saved_settings() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((paths.config_dir() / "settings.json").read_text(encoding="utf-8"))
    return data


def click_tab(qtbot: Any, window: Any, index: int) -> None:
    bar = window.tabs.tabBar()
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())
    qtbot.waitUntil(lambda: window.tabs.currentIndex() == index)


def action(window: Any, name: str) -> QAction:
    return next(a for a in window.findChildren(QAction) if a.objectName() == name or a.text() == name)


@pytest.fixture
def data_folder(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared data files' folder, as the working directory (the files are named relative to it)."""
    folder = shared_data("files")
    monkeypatch.chdir(folder)
    return folder


def test_relative_paths_come_back_from_another_folder_in_order_with_the_front_tab(
    launch: Any,
    qtbot: Any,
    monkeypatch: pytest.MonkeyPatch,
    data_folder: Path,
    tmp_path: Path,
    artifacts: Path,
) -> None:
    """`sqale-desktop excel/… csv/… ../sample/chinook.sqlite` in the data folder; the person clicks
    the workbook's tab and quits; relaunched from another folder: the same three tabs, in the order
    given (the SQLite file opens long before the workbook's import ends), the workbook in front,
    no "does not exist" and no demo; Open Recent reopens a closed one from there too."""
    given = [Path(WORKBOOK), Path(CSV), Path(DATABASE)]
    expected = [os.path.abspath(p) for p in given]
    first: dict[str, Any] = {}

    def look_and_pick(window: Any) -> None:
        wait_tabs(qtbot, window, 3)
        first["names"] = tab_names(window)
        first["sources"] = [str(p.source) for p in window.pages()]
        first["front"] = window.tabs.currentIndex()
        click_tab(qtbot, window, 0)

    assert launch(look_and_pick, files=given) == 0
    assert first["names"] == ["csvkit__sheets.xlsx", "frictionless__table-with-accents.csv", "chinook.sqlite"]
    assert first["sources"] == expected
    assert first["front"] == 2  # the last file given is in front, whichever open ended last
    settings = saved_settings()
    assert settings["open_databases"] == expected
    assert settings["active_database"] == expected[0]
    assert all(Path(p).is_absolute() for p in settings["recent_databases"])

    monkeypatch.chdir(tmp_path)  # another folder: the relative names would mean nothing here
    again: dict[str, Any] = {}

    def relaunched(window: Any) -> None:
        wait_tabs(qtbot, window, 3)
        again["names"] = tab_names(window)
        again["front"] = window.tabs.currentIndex()
        again["title"] = window.windowTitle()
        again["banner"] = window.banner.isVisible() and window.banner.text()
        window.grab().save(str(artifacts / "journey_relaunched_elsewhere.png"))
        # Close the CSV's tab, then File → Open Recent → the CSV, still from the other folder.
        click_tab(qtbot, window, 1)
        qtbot.keyClick(window, Qt.Key.Key_W, CTRL)
        wait_tabs(qtbot, window, 2)
        recent = next(a for a in window.databases.recent_menu.actions() if a.text() == expected[1])
        with qtbot.waitSignal(window.database_opened, timeout=60_000):
            recent.trigger()  # menus are native popups; the action is what they trigger
        again["after_recent"] = tab_names(window)

    assert launch(relaunched) == 0
    assert again["names"] == first["names"]
    assert again["front"] == 0
    assert again["title"] == "csvkit__sheets.xlsx — SQaLe Desktop"
    assert again["banner"] is False
    assert again["after_recent"] == [
        "csvkit__sheets.xlsx",
        "chinook.sqlite",
        "frictionless__table-with-accents.csv",
    ]


def test_the_process_relaunched_elsewhere_restores_the_absolute_paths(tmp_path: Path) -> None:
    """The `sqale-desktop` process itself: started in the data folder with relative names, then
    with none from another folder; its quit hook reports the tabs, their sources and the front one."""
    folder = shared_data("files")
    home = tmp_path / "home"
    env = dict(
        os.environ, QT_QPA_PLATFORM="offscreen", SQALE_DESKTOP_HOME=str(home), **{QUIT_AFTER_SHOWN_ENV: "1"}
    )
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])

    def ready(done: Any) -> dict[str, Any]:
        assert done.returncode == 0, done.stderr
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert [e["event"] for e in events] == ["shown", "ready"]
        event: dict[str, Any] = events[1]
        return event

    first = ready(run_cli(DATABASE, CSV, env=env, cwd=folder))
    expected = [os.path.abspath(folder / DATABASE), os.path.abspath(folder / CSV)]
    assert first["sources"] == expected and first["errors"] == []
    assert first["current"] == 1

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = ready(run_cli(env=env, cwd=elsewhere))
    assert again["errors"] == []
    assert again["sources"] == expected
    assert again["names"] == ["chinook.sqlite", "frictionless__table-with-accents.csv"]
    assert again["current"] == 1
    assert again["title"] == "frictionless__table-with-accents.csv — SQaLe Desktop"
    assert not (elsewhere / "csv").exists() and list(elsewhere.iterdir()) == []  # nothing left there


def test_open_folder_and_several_files_at_once(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, chinook: Path, northwind: Path
) -> None:
    """Ctrl+Shift+O (File → Open Folder…) opens a folder of TSVs as one database, a table each;
    Ctrl+O with two files chosen opens both, in the order chosen, the last in front."""
    folder = shared_data("files/tsv")
    seen: dict[str, Any] = {}
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *_a, **_k: str(folder)))
    monkeypatch.setattr(
        QFileDialog, "getOpenFileNames", staticmethod(lambda *_a, **_k: ([str(northwind), str(chinook)], ""))
    )

    def journey(window: Any) -> None:
        wait_tabs(qtbot, window, 1)  # first run: the demo shop
        seen["menu"] = [a.text() for a in window.menuBar().actions()[0].menu().actions()]
        seen["folder_keys"] = action(window, "open_folder").shortcut().toString()
        with qtbot.waitSignal(window.database_opened, timeout=60_000):
            qtbot.keyClick(window, Qt.Key.Key_O, CTRL | SHIFT)
        page = window.current_page()
        seen["folder_tab"] = window.tabs.tabText(window.tabs.currentIndex())
        seen["tables"] = sorted(page.schema_model.countable_tables())
        seen["source"] = page.source
        qtbot.keyClick(window, Qt.Key.Key_O, CTRL)
        wait_tabs(qtbot, window, 4)
        seen["names"] = tab_names(window)
        seen["front"] = window.current_page().display_name

    assert launch(journey) == 0
    assert "Open &Folder…" in seen["menu"]
    assert seen["folder_keys"] == "Ctrl+Shift+O"
    assert seen["folder_tab"] == "tsv" and seen["source"] == folder
    assert len(seen["tables"]) == 2  # one table per TSV
    assert seen["names"] == ["shop.sqlite", "tsv", "northwind.sqlite", "chinook.sqlite"]
    assert seen["front"] == "chinook.sqlite"


def test_a_data_file_is_named_after_itself_and_its_conversation_reopens_it(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, artifacts: Path
) -> None:
    """A CSV opened with Ctrl+O: its name (never `….csv.sqlite`) in the tab, the window title, the
    schema's title, the status bar and the query history.  SQL run by hand (Ctrl+Enter) is kept
    with it; the tab is closed and the CSV gains a row; File → Stored Conversations… lists the CSV,
    and Open reopens the CSV itself, imported again, with the run still listed."""
    source = tmp_path / "orders.csv"
    shutil.copyfile(SHARED_DATA / "files" / CSV, source)  # a copy: this journey changes it
    rows_before = source.read_bytes().count(b"\n") - 1  # a cp1252 file, CRLF lines, one header
    seen: dict[str, Any] = {}
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", staticmethod(lambda *_a, **_k: ([str(source)], "")))
    count = "SELECT COUNT(*) FROM orders"

    def journey(window: Any) -> None:
        from PySide6.QtWidgets import QLabel

        from sqale_desktop.ui.conversations_dialog import ConversationsDialog

        wait_tabs(qtbot, window, 1)
        with qtbot.waitSignal(window.database_opened, timeout=60_000):
            qtbot.keyClick(window, Qt.Key.Key_O, CTRL)
        page = window.current_page()
        seen["copy"] = page.path
        seen["tab"] = window.tabs.tabText(window.tabs.currentIndex())
        seen["title"] = window.windowTitle()
        seen["labels"] = [
            label.text() for label in page.findChildren(QLabel) if label.text().startswith("<b>")
        ]
        seen["status"] = window.status.message_label.text()
        page.sql.editor.set_sql(count)
        with qtbot.waitSignal(page.sql.user_ran, timeout=30_000):
            qtbot.keyClick(page.sql.editor, Qt.Key.Key_Return, CTRL)
        seen["count_before"] = grid_rows(page)
        seen["run_db"] = [run.database for run in page.sql.history.shown_runs()]
        qtbot.keyClick(window, Qt.Key.Key_W, CTRL)
        wait_tabs(qtbot, window, 1)
        with source.open("ab") as handle:  # one more row, in the file's own codec and layout
            handle.write("5 stars;Élysée;01-01-13;2013;0,5;80,0;40,0;Mkg\r\n".encode("cp1252"))

        def shown() -> list[ConversationsDialog]:
            return [
                w
                for w in QApplication.topLevelWidgets()
                if isinstance(w, ConversationsDialog) and w.isVisible()
            ]

        def pick() -> None:
            try:
                choose(shown()[0])
            finally:  # a failed step fails the test (no database_opened) instead of leaving it modal
                for dialog in shown():
                    dialog.reject()

        def choose(dialog: ConversationsDialog) -> None:
            seen["listed"] = [
                dialog.list.item(i).text().split("  —  ")[0] for i in range(dialog.list.count())
            ]
            items = dialog.list.findItems("orders.csv", Qt.MatchFlag.MatchStartsWith)
            dialog.list.setCurrentItem(items[0])
            seen["listed_tip"] = items[0].toolTip()
            rect = dialog.list.visualItemRect(items[0])
            qtbot.mouseClick(dialog.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
            dialog.grab().save(str(artifacts / "journey_stored_conversation_source.png"))
            qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)

        QTimer.singleShot(0, pick)
        with qtbot.waitSignal(window.database_opened, timeout=60_000):
            action(window, "Stored Conversations…").trigger()
        page = window.current_page()
        seen["reopened_source"] = page.source
        seen["reopened_tab"] = window.tabs.tabText(window.tabs.currentIndex())
        seen["runs_after"] = [(run.sql, run.database) for run in page.sql.history.shown_runs()]
        seen["tip"] = window.tabs.tabToolTip(window.tabs.currentIndex())
        page.sql.editor.set_sql(count)
        with qtbot.waitSignal(page.sql.user_ran, timeout=30_000):
            qtbot.keyClick(page.sql.editor, Qt.Key.Key_Return, CTRL)
        seen["count_after"] = grid_rows(page)

    assert launch(journey) == 0
    copy_name = Path(seen["copy"]).name
    assert copy_name == "orders.csv.sqlite"  # the copy the page reads, and which nothing names
    assert seen["tab"] == "orders.csv"
    assert seen["title"] == "orders.csv — SQaLe Desktop"
    assert seen["labels"] == ["<b>orders.csv</b>"]
    assert "orders.csv" in seen["status"] and copy_name not in seen["status"]
    assert seen["count_before"] == [(rows_before,)]
    assert seen["run_db"] == ["orders.csv"]
    assert [name for name in seen["listed"] if "orders" in name] == ["orders.csv"]
    assert seen["listed_tip"] == str(source)
    assert seen["reopened_source"] == source and seen["reopened_tab"] == "orders.csv"
    assert seen["runs_after"] == [(count, "orders.csv")]
    assert "imported again" in seen["tip"]
    assert seen["count_after"] == [(rows_before + 1,)]
