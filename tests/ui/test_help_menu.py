"""Help → Show Log Folder opens the folder holding the app's log file (issue 11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QAction, QDesktopServices

from sqale_desktop.core import paths
from sqale_desktop.core.history import History
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.main_window import MainWindow


def test_help_menu_opens_the_log_folder(qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    window = MainWindow(Settings(), None, history=History(tmp_path / "history.sqlite"))
    qtbot.addWidget(window)
    menus = {a.text(): a.menu() for a in window.menuBar().actions()}
    assert "&Help" in menus
    action = window.findChild(QAction, "show_log_folder")
    assert action is not None and action in menus["&Help"].actions()
    action.trigger()
    assert [Path(u.toLocalFile()) for u in opened] == [paths.log_dir()]
    assert window.shutdown()


def test_every_shortcut_of_the_window_is_in_the_help(qtbot: Any, chinook: Path, tmp_path: Path) -> None:
    """The help's table is written for people; this keeps it from falling behind the window."""
    from PySide6.QtGui import QKeySequence, QShortcut

    from sqale_desktop.ui.help_menu import SHORTCUTS, bindings

    window = MainWindow(Settings(), None, history=History(tmp_path / "history.sqlite"))
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.database_opened, timeout=20_000):
        window.open_database(chinook)  # a tab brings the grid's, the editor's and the tree's own
    portable = QKeySequence.SequenceFormat.PortableText
    keys = {k.toString(portable) for a in window.findChildren(QAction) for k in a.shortcuts()}
    keys |= {s.key().toString(portable) for s in window.findChildren(QShortcut)}
    keys.discard("")
    listed = {k.toString(portable) for keys, _what in SHORTCUTS for k in bindings(keys)}
    assert keys <= listed, keys - listed
    assert {"F1", "Ctrl+PgDown", "Ctrl+PgUp", "Esc"} <= keys
    assert window.shutdown()


def test_about_names_the_versions(qtbot: Any, tmp_path: Path) -> None:
    from PySide6 import __version__ as pyside

    from sqale_desktop import __version__
    from sqale_desktop.ui.help_menu import versions

    rows = dict(versions("SQaLe Q4_K_M (local CPU)"))
    assert rows["SQaLe Desktop"] == __version__
    assert rows["Model"] == "SQaLe Q4_K_M (local CPU)"
    assert pyside in rows["Qt"]
    import llama_cpp  # the test extras install it; About must not need to import it

    assert rows["llama.cpp (llama-cpp-python)"] == llama_cpp.__version__


DATA_KINDS = ("CSV", "TSV", "JSON", "JSONL", ".gz", "Excel", "OpenDocument", "Parquet", "DuckDB", "folder")
"""What opens besides a SQLite database (core.imports.kind_of's kinds), as the help names them."""


def test_f1_help_says_data_files_and_folders_open(qtbot: Any, tmp_path: Path) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication, QDialog, QTextBrowser

    window = MainWindow(Settings(), None, history=History(tmp_path / "history.sqlite"))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)  # shortcuts need it
    qtbot.keyClick(window, Qt.Key.Key_F1)
    qtbot.waitUntil(lambda: window.findChild(QDialog, "helpDialog") is not None, timeout=5000)
    dialog = window.findChild(QDialog, "helpDialog")
    text = dialog.findChild(QTextBrowser, "helpText").toPlainText()
    for kind in DATA_KINDS:
        assert kind in text, kind
    dialog.close()
    QApplication.processEvents()
    assert window.shutdown()


def test_cli_help_says_data_files_and_folders_open() -> None:
    from tests.commands.subprocess_cli import run_cli

    out = run_cli("--help").stdout
    for kind in DATA_KINDS:
        assert kind in out, kind
    assert "SQLite FILEs" not in out
