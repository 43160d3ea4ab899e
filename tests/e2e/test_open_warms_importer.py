"""Ctrl+O starts the importers' fork server while the person chooses (core.child.start_ahead): the
import of the CSV they choose is forked from that server, already warm, and the server and the
child it forked ahead end when it is retired, leaving no process behind (Linux: fork servers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog

from sqale_desktop.core import child
from sqale_desktop.core.child import forks
from tests.helpers import children_of, record_forks

pytestmark = pytest.mark.skipif(not forks.available(), reason="fork servers are Linux's")
MODULE = "sqale_desktop.core.imports.isolated"
CTRL = Qt.KeyboardModifier.ControlModifier


def test_ctrl_o_warms_the_importer_while_the_person_chooses(
    launch: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    child.discard_spares()  # no server left by an earlier test: this one must come from Ctrl+O
    source = tmp_path / "orders.csv"
    source.write_text("id,item\n" + "".join(f"{i},item {i}\n" for i in range(500)), encoding="utf-8")
    seen: dict[str, Any] = {}

    def choose(*_args: Any, **_kwargs: Any) -> tuple[list[str], str]:
        """The dialog, open while the person chooses: the server starts and warms up meanwhile."""
        qtbot.waitUntil(lambda: child.wait_warm(MODULE, 0.0), timeout=60_000)
        return [str(source)], ""

    forked = record_forks(monkeypatch)
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", staticmethod(choose))

    def journey(window: Any) -> None:
        def tabs(count: int) -> None:
            qtbot.waitUntil(lambda: len(window.pages()) == count and not window.databases.opening,
                            timeout=60_000)  # fmt: skip

        tabs(1)  # the first run's demo shop
        qtbot.keyClick(window, Qt.Key.Key_O, CTRL)
        tabs(2)
        seen["tab"] = window.tabs.tabText(window.tabs.currentIndex())

    assert launch(journey) == 0
    assert seen["tab"] == "orders.csv"
    [(import_child, server)] = forked  # one import, served by the server Ctrl+O started

    def spare_ahead() -> bool:
        """The idle server forked the next child ahead (after reaping the import's: until
        then the server may have the import's zombie, or no child, on a loaded machine)."""
        found = children_of(server)
        return len(found) == 1 and found[0] != import_child

    qtbot.waitUntil(spare_ahead, timeout=60_000)
    family = [server, *children_of(server)]  # the server and the child it forked ahead
    child.discard_spares()  # as at the app's exit: the server retires, its spare ends with it
    assert not [pid for pid in family if Path(f"/proc/{pid}").exists()]
