"""Qt tests run offscreen; every test fails if it leaves a worker thread running.

Fixtures shared by the UI tests live here (``make_window``, ``artifacts``, ``themed``, and the
import tabs' ``tabs`` and ``held_import``); the helpers they import are plain functions in
``windows.py``, ``sql_panels.py``, ``replay_scripts.py`` and ``import_tabs.py``.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.import_hold import hold_after_first_rows

if TYPE_CHECKING:
    import threading

    from sqale_desktop.core.history import History
    from sqale_desktop.ui.main_window import MainWindow
    from tests.ui.import_tabs import Tabs
    from tests.ui.windows import WindowFactory

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
UI_DIR = Path(__file__).resolve().parent

# The offscreen platform cannot resize native windows to their size hints and says so; that is a
# fact about the headless plugin, not about the app.
OFFSCREEN_NOISE = ("This plugin does not support propagateSizeHints",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if UI_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.qt_log_ignore(*OFFSCREEN_NOISE))


@pytest.fixture(autouse=True)
def no_thread_left_running(qapp: object) -> Iterator[None]:
    yield
    from sqale_desktop.ui.workers import busy_thread_owners

    busy = busy_thread_owners()
    for owner in busy:  # stop them so that one leak does not cascade into the next tests
        owner.shutdown()
    assert not busy, f"threads left running: {busy}"


@pytest.fixture
def artifacts() -> Path:
    """Where screenshots go (git ignored); look at them."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def themed() -> Iterator[None]:
    """For tests that switch the palette: the light theme again afterwards, for the tests after them."""
    yield
    from PySide6.QtWidgets import QApplication

    from sqale_desktop.ui.palette import apply_theme

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app, "light")


@pytest.fixture
def make_window(qtbot: Any, tmp_path: Path) -> Iterator[WindowFactory]:
    """Build shown windows over a replay engine (``script``: its completions, the Chinook answer by
    default; ``[]``: no model); each is shut down after the test, and must shut down cleanly."""
    from sqale_desktop.core.engines.replay import ReplayEngine
    from sqale_desktop.core.history import History
    from sqale_desktop.core.settings import Settings
    from sqale_desktop.ui.main_window import MainWindow
    from tests.ui.replay_scripts import chinook_script
    from tests.ui.runtimes import scripted

    windows: list[MainWindow] = []

    def make(
        script: list[str] | None = None, delay: float = 0.0, history: History | None = None
    ) -> MainWindow:
        completions = script if script is not None else chinook_script()
        # No script: the window's own runtime, which finds no model in the test's settings folder.
        runtime = (
            scripted(lambda: ReplayEngine(completions, chunk_chars=6, delay=delay)) if script != [] else None
        )
        window = MainWindow(Settings(), runtime, history=history or History(tmp_path / "history.sqlite"))
        qtbot.addWidget(window)
        window.show()
        windows.append(window)
        return window

    yield make
    for window in windows:
        assert window.shutdown()


@pytest.fixture
def tabs(qtbot: Any) -> Iterator[Tabs]:
    """The data-file tab bar alone (``import_tabs.Tabs``), closed and its pool drained after."""
    from tests.ui.import_tabs import Tabs

    made = Tabs(qtbot)
    yield made
    made.tabs.close_all()
    assert made.pool.shutdown()
    made.tabs.release_all()


@pytest.fixture
def held_import(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The import holds after its first rows until the returned event is set
    (``tests/import_hold.py``)."""
    release = hold_after_first_rows(monkeypatch)
    yield release
    release.set()
