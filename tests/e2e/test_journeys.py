"""What a person does with the window, from launch to quit and relaunch (issue 20).

Each journey starts the app through ``run_app`` with a real settings folder, presses the keys and
clicks the buttons a person would (the native file dialog alone is answered for them), restarts
where a person restarts, and checks what a person sees: the tabs, the window's width after a long
message, the status bar of the tab in front.  Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QDialog, QFileDialog, QLabel, QPushButton, QTextBrowser

from sqale_desktop.core import paths
from tests.helpers import shared_data

CTRL = Qt.KeyboardModifier.ControlModifier


def wait_tabs(qtbot: Any, window: Any, count: int) -> None:
    qtbot.waitUntil(lambda: len(window.pages()) == count and not window.databases.opening, timeout=30_000)


def press_ctrl_o(qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch, path: Path, opens: bool) -> None:
    """Ctrl+O, and the file dialog answers ``path`` (a native dialog cannot be driven offscreen)."""
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", staticmethod(lambda *_a, **_k: ([str(path)], "")))
    signal = window.database_opened if opens else window.open_failed
    with qtbot.waitSignal(signal, timeout=30_000):
        qtbot.keyClick(window, Qt.Key.Key_O, CTRL)


def saved_tabs() -> list[str]:
    data = json.loads((paths.config_dir() / "settings.json").read_text(encoding="utf-8"))
    return list(data["open_databases"])


def test_open_tabs_come_back_after_a_restart(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, chinook: Path, northwind: Path, artifacts: Path
) -> None:
    """Issue 20, item 1: quit with three tabs, relaunch: the same three, in the same order."""
    first: dict[str, Any] = {}

    def open_three(window: Any) -> None:
        wait_tabs(qtbot, window, 1)  # first run: the demo shop
        press_ctrl_o(qtbot, window, monkeypatch, chinook, opens=True)
        press_ctrl_o(qtbot, window, monkeypatch, northwind, opens=True)
        first["names"] = [window.tabs.tabText(i) for i in range(window.tabs.count())]

    assert launch(open_three) == 0
    assert first["names"] == ["shop.sqlite", "chinook.sqlite", "northwind.sqlite"]
    before = saved_tabs()
    assert [Path(p).name for p in before] == first["names"]

    again: dict[str, Any] = {}

    def look(window: Any) -> None:
        wait_tabs(qtbot, window, 3)
        again["names"] = [window.tabs.tabText(i) for i in range(window.tabs.count())]
        window.grab().save(str(artifacts / "journey_restored_tabs.png"))

    assert launch(look) == 0
    assert again["names"] == first["names"]
    assert saved_tabs() == before  # not overwritten with the demo alone


def test_a_long_message_never_widens_the_window(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, artifacts: Path
) -> None:
    """Issue 20, item 2: the damaged Anki file's integrity report, and an error naming a very long
    path, in a 1024 px window: it stays 1024 px, every button stays inside it."""
    corrupt = shared_data("awkward/anki_corrupt_diskfull.anki2")
    deep = tmp_path / ("a_folder_with_a_name_that_goes_on_" * 6) / "not_a_database_at_all.sqlite"
    deep.parent.mkdir(parents=True)
    deep.write_text("plain text, not SQLite", encoding="utf-8")
    seen: dict[str, Any] = {}

    def open_long_messages(window: Any) -> None:
        wait_tabs(qtbot, window, 1)
        window.resize(1024, 700)
        qtbot.waitUntil(lambda: window.width() == 1024)
        press_ctrl_o(qtbot, window, monkeypatch, corrupt, opens=True)
        page = window.current_page()
        qtbot.waitUntil(lambda: "damaged" in page.banners.texts(), timeout=30_000)
        press_ctrl_o(qtbot, window, monkeypatch, deep, opens=False)
        qtbot.waitUntil(lambda: window.banner.isVisible())
        QApplication.processEvents()
        seen["width"] = window.width()
        seen["minimum"] = window.minimumSizeHint().width()
        seen["damaged"] = page.banners.texts()["damaged"]
        seen["status_tip"] = window.status.message_label.toolTip()
        buttons = [b for b in window.findChildren(QPushButton) if b.isVisible()]
        seen["outside"] = [
            b.text() for b in buttons if b.mapTo(window, b.rect().topRight()).x() > window.width()
        ]
        window.grab().save(str(artifacts / "journey_long_messages.png"))

    assert launch(open_long_messages) == 0
    assert "damaged" in seen["damaged"] and len(seen["damaged"]) > 200  # the message is long
    assert seen["width"] == 1024 and seen["minimum"] <= 1024
    assert seen["outside"] == []
    assert deep.name in seen["status_tip"] or "Could not open" in seen["status_tip"]


def test_messages_belong_to_their_tab_and_a_stale_error_goes(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, chinook: Path, northwind: Path, tmp_path: Path
) -> None:
    """Issue 20, item 9: "Could not open bad.sqlite" goes once a file opens; the status bar shows
    the tab in front's news, also after Ctrl+PgUp / Ctrl+PgDown (item 15)."""
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database", encoding="utf-8")
    seen: dict[str, Any] = {}

    def journey(window: Any) -> None:
        wait_tabs(qtbot, window, 1)
        press_ctrl_o(qtbot, window, monkeypatch, bad, opens=False)
        seen["banner_after_bad"] = window.banner.isVisible() and window.banner.text()
        press_ctrl_o(qtbot, window, monkeypatch, chinook, opens=True)
        seen["banner_after_good"] = window.banner.isVisible()
        press_ctrl_o(qtbot, window, monkeypatch, northwind, opens=True)
        seen["on_northwind"] = window.status.message_label.text()
        qtbot.keyClick(window, Qt.Key.Key_PageUp, CTRL)
        seen["front_after_pgup"] = window.current_page().path.name
        seen["on_chinook"] = window.status.message_label.text()
        qtbot.keyClick(window, Qt.Key.Key_PageDown, CTRL)
        seen["front_after_pgdown"] = window.current_page().path.name
        seen["back_on_northwind"] = window.status.message_label.text()
        qtbot.keyClick(window, Qt.Key.Key_PageDown, CTRL)  # past the last tab: the first
        seen["wrapped"] = window.current_page().path.name

    assert launch(journey) == 0
    assert str(seen["banner_after_bad"]).startswith("Could not open bad.sqlite")
    assert seen["banner_after_good"] is False
    assert seen["on_northwind"].startswith("Opened northwind.sqlite")
    assert (seen["front_after_pgup"], seen["on_chinook"][:21]) == ("chinook.sqlite", "Opened chinook.sqlite")
    assert seen["front_after_pgdown"] == "northwind.sqlite"
    assert seen["back_on_northwind"].startswith("Opened northwind.sqlite")
    assert seen["wrapped"] == "shop.sqlite"


def test_f1_lists_the_shortcuts_and_about_names_the_versions(
    launch: Any, qtbot: Any, artifacts: Path
) -> None:
    """Issue 20, item 15: F1 opens the help with the shortcuts; Help → About the versions."""
    seen: dict[str, Any] = {}

    def journey(window: Any) -> None:
        wait_tabs(qtbot, window, 1)
        qtbot.keyClick(window, Qt.Key.Key_F1)
        qtbot.waitUntil(lambda: window.findChild(QDialog, "helpDialog") is not None)
        help_dialog = window.findChild(QDialog, "helpDialog")
        qtbot.waitUntil(help_dialog.isVisible)
        seen["help"] = help_dialog.findChild(QTextBrowser, "helpText").toPlainText()
        help_dialog.grab().save(str(artifacts / "journey_help.png"))
        qtbot.keyClick(help_dialog, Qt.Key.Key_Escape)
        qtbot.waitUntil(lambda: not help_dialog.isVisible())
        about = next(a for a in window.findChildren(QAction) if a.objectName() == "about")
        about.trigger()  # Help → About (menus are native popups; the action is what they trigger)
        dialog = window.findChild(QDialog, "aboutDialog")
        qtbot.waitUntil(lambda: dialog is not None and dialog.isVisible())
        seen["about"] = " ".join(label.text() for label in dialog.findChildren(QLabel))
        dialog.grab().save(str(artifacts / "journey_about.png"))
        dialog.reject()

    assert launch(journey) == 0
    for keys, what in (("F1", "This help"), ("Ctrl+PgDown", "Next tab"), ("Esc", "Stop the agent")):
        assert f"{keys}\n{what}" in seen["help"] or f"{keys}\t{what}" in seen["help"], keys
    for keys in ("Ctrl+PgUp", "Ctrl+Enter", "Ctrl+O", "Ctrl+W", "Ctrl+Q"):
        assert keys in seen["help"], keys
    for what in ("SQaLe Desktop", "llama.cpp", "Qt", "Model"):
        assert what in seen["about"]
    assert "<b>no model installed</b>" in seen["about"]  # no model in this settings folder


def test_a_stored_conversation_opens_its_database(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, chinook: Path
) -> None:
    """Issue 20, item 15: close chinook's tab; File → Stored Conversations…, pick it, Open: it is back."""
    seen: dict[str, Any] = {}

    def journey(window: Any) -> None:
        from sqale_desktop.ui.conversations_dialog import ConversationsDialog

        wait_tabs(qtbot, window, 1)
        press_ctrl_o(qtbot, window, monkeypatch, chinook, opens=True)
        qtbot.keyClick(window, Qt.Key.Key_W, CTRL)  # close chinook's tab
        wait_tabs(qtbot, window, 1)

        def pick() -> None:
            dialog = next(w for w in QApplication.topLevelWidgets() if isinstance(w, ConversationsDialog))
            items = dialog.list.findItems("chinook.sqlite", Qt.MatchFlag.MatchStartsWith)
            dialog.list.setCurrentItem(items[0])
            qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)

        action = next(a for a in window.findChildren(QAction) if a.text() == "Stored Conversations…")
        QTimer.singleShot(0, pick)
        with qtbot.waitSignal(window.database_opened, timeout=30_000):
            action.trigger()
        seen["tabs"] = [p.path.name for p in window.pages()]

    assert launch(journey) == 0
    assert seen["tabs"] == ["shop.sqlite", "chinook.sqlite"]


def test_the_recorded_answer_is_still_there_after_a_restart(launch: Any, qtbot: Any, artifacts: Path) -> None:
    """Issue 20, item 15: watch the recorded answer on the demo, quit, relaunch: it is in the
    demo's conversation, badged as a recording."""
    played: dict[str, Any] = {}

    def watch(window: Any) -> None:
        wait_tabs(qtbot, window, 1)
        window.recording_delay = 0.0  # the test's pace; the recording is the same
        page = window.current_page()
        with qtbot.waitSignal(window.episode_finished, timeout=60_000) as finished:
            qtbot.mouseClick(page.chat.watch_button, Qt.MouseButton.LeftButton)
        played["sql"] = finished.args[0].sql

    assert launch(watch) == 0
    seen: dict[str, Any] = {}

    def look(window: Any) -> None:
        wait_tabs(qtbot, window, 1)
        page = window.current_page()
        seen["episodes"] = [(v.episode.question, v.episode.sql, v.recording) for v in page.chat.episodes]
        window.grab().save(str(artifacts / "journey_recording_restored.png"))

    assert launch(look) == 0
    from sqale_desktop.core.demo import DEMO_QUESTIONS

    assert seen["episodes"] == [(DEMO_QUESTIONS[0].question, played["sql"], True)]
