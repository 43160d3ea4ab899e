"""Many tabs (issue 32 item 9): 17 tabs had 45 database worker processes (1.45 GB) and quitting
took 6 s.  Opened through the window, each tab's grid holding a cursor between pages, the workers
stay under the pool's cap; every grid still scrolls to its last row (a cursor whose worker went
to another tab resumes); Ctrl+Q closes the window and ends the workers the tabs used."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from sqale_desktop.core.db.process import MAX_WORKERS, SPARES
from sqale_desktop.core.history import History
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.main_window import MainWindow
from tests.core.db.running import wait_for, worker_pids
from tests.ui.windows import grid_rows, open_page

TABS = 17
ROWS = 1_200  # more than the grid's first page: each grid keeps its cursor open


def _database(path: Path, tag: int) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x INTEGER, tag INTEGER)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, tag) for i in range(ROWS)])
    conn.commit()
    conn.close()
    return path


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="counts processes in /proc")
def test_seventeen_tabs_keep_the_workers_bounded_and_quit_ends_them(qtbot: Any, tmp_path: Path) -> None:
    files = [_database(tmp_path / f"tab{i}.sqlite", i) for i in range(TABS)]
    window = MainWindow(Settings(), None, history=History(tmp_path / "history.sqlite"))
    qtbot.addWidget(window)
    window.show()
    peak = 0
    pages = []
    for path in files:
        page = open_page(qtbot, window, path)
        pages.append(page)
        peak = max(peak, len(worker_pids()))
        page.sql.editor.set_sql("SELECT x, tag FROM t ORDER BY x")
        with qtbot.waitSignal(page.sql.query_finished, timeout=30_000):
            qtbot.mouseClick(page.sql.run_button, Qt.MouseButton.LeftButton)
        peak = max(peak, len(worker_pids()))
    assert 0 < peak <= MAX_WORKERS
    for tag, page in enumerate(pages):
        window.tabs.setCurrentWidget(page)
        assert grid_rows(page) == [(i, tag) for i in range(ROWS)]
        peak = max(peak, len(worker_pids()))
    assert peak <= MAX_WORKERS
    qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    assert not window.isVisible()
    # The tabs' workers are gone; the pool's one spare ends with the process (atexit).
    assert wait_for(lambda: len(worker_pids()) <= SPARES), worker_pids()
