"""Journeys through the whole app: ``run_app`` itself, driven while its event loop runs.

``launch`` starts the app the way ``sqale-desktop [FILE...]`` does (``run_app``, the real settings
folder under ``SQALE_DESKTOP_HOME``, restored tabs, the window shown), runs ``drive(window)``
once the event loop is running, then quits as a person does (Ctrl+Q) unless ``drive`` already
quit.  A restart is a second ``launch`` on the same settings folder.  Whatever ``drive`` raises is
raised again by ``launch``, after the app has shut down.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
OFFSCREEN_NOISE = ("This plugin does not support propagateSizeHints",)

Drive = Callable[[Any], None]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.qt_log_ignore(*OFFSCREEN_NOISE))


@pytest.fixture
def artifacts() -> Path:
    """Where screenshots go (git ignored); look at them."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def launch(qapp: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch, reset_logging: None) -> Iterator[Any]:
    """``launch(drive, files=())``: run the app, drive it, quit; returns run_app's exit status."""
    from PySide6.QtCore import Qt, QTimer

    from sqale_desktop.ui.app import run_app
    from sqale_desktop.ui.main_window import MainWindow
    from sqale_desktop.ui.workers import busy_thread_owners

    # run_app installs the app's excepthook; the test's own comes back afterwards.
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)

    def run(drive: Drive, files: Sequence[Path] = ()) -> int:
        errors: list[BaseException] = []

        def start() -> None:
            windows = [w for w in qapp.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
            if len(windows) != 1:
                errors.append(AssertionError(f"expected one shown main window, found {windows}"))
                qapp.exit(1)
                return
            window = windows[0]
            try:
                drive(window)
            except BaseException as exc:  # re-raised by launch once the app is down
                errors.append(exc)
            if window.isVisible():
                window.activateWindow()  # back in front after a dialog, as a click on it would do
                qtbot.waitUntil(window.isActiveWindow)
                qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)  # File → Quit
            status = 0
            if window.isVisible():  # drive left a modal in the way: the app is to end all the same
                window.close()
                status = 1
            # Not left to "last window closed": a window another test left open would keep it open.
            qapp.exit(status)

        QTimer.singleShot(0, start)
        status = run_app(files=list(files))
        # A quit that arrived after the loop ended (Qt posts one when the last window closes) would
        # end every event loop the next test starts: run one loop to let it through, harmlessly.
        QTimer.singleShot(0, qapp.quit)
        qapp.exec()
        if errors:
            raise errors[0]
        assert busy_thread_owners() == []
        return status

    yield run
