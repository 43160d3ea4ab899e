"""A Stop the person chose is a note, not an error (issue 32, item 11).

``sqale-desktop big.csv``, then Stop on the importing tab, clicked with the mouse: the window
said "Could not open big.csv: Import of big.csv stopped; nothing was kept" in its red error
banner.  Nothing went wrong: the person stopped it.  The status bar says what happened, the red
banner stays away, also once the launch has settled (the demo opens, as for a launch file that
did not open).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from sqale_desktop.ui.banners import COLOURS
from tests.import_hold import hold_after_first_rows

RED = QColor(COLOURS["error"][0])


@pytest.fixture
def held_import(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The import holds after its first rows until the returned event is set
    (``tests/import_hold.py``)."""
    release = hold_after_first_rows(monkeypatch)
    yield release
    release.set()


def red_pixels(widget: Any) -> int:
    image = widget.grab().toImage()
    return sum(
        image.pixelColor(x, y).rgb() == RED.rgb()
        for y in range(0, image.height(), 2)
        for x in range(0, image.width(), 2)
    )


def big_csv(tmp_path: Path) -> Path:
    source = tmp_path / "big.csv"
    source.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(50_000)), encoding="utf-8")
    return source


def stop_by_mouse(qtbot: Any, window: Any, held_import: threading.Event) -> None:
    """Click Stop on the importing tab (the current one) while the import is held, then release it."""
    importing = window.tabs.currentWidget()
    qtbot.waitUntil(lambda: "Importing big.csv" in importing.label.text(), timeout=30_000)
    with qtbot.waitSignal(window.open_failed, timeout=30_000):
        qtbot.mouseClick(importing.stop_button, Qt.MouseButton.LeftButton)
        held_import.set()


def test_stopping_a_launch_files_import_is_a_note_not_an_error(
    launch: Any, qtbot: Any, tmp_path: Path, held_import: threading.Event
) -> None:
    """``sqale-desktop big.csv``, stopped: the demo opens, as for a launch file that did not, and
    the launch, once settled, shows no error for the stopped file."""
    source = big_csv(tmp_path)
    seen: dict[str, Any] = {}

    def journey(window: Any) -> None:
        qtbot.waitUntil(
            lambda: window.tabs.count() == 1 and window.tabs.tabText(0) == "big.csv", timeout=30_000
        )
        stop_by_mouse(qtbot, window, held_import)
        seen["banner_at_stop"] = window.banner.isVisible()
        qtbot.waitUntil(lambda: len(window.pages()) == 1 and not window.databases.opening, timeout=30_000)
        seen["banner_settled"] = window.banner.isVisible()
        seen["red_settled"] = red_pixels(window)

    assert launch(journey, files=[source]) == 0
    assert seen["banner_at_stop"] is False
    assert seen["banner_settled"] is False and seen["red_settled"] == 0
