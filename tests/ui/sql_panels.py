"""A shown SQL panel over a database file, and everything it started ended and released after."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqale_desktop.core.db.connection import open_readonly
from sqale_desktop.ui.sql_panel import SqlPanel
from sqale_desktop.ui.workers import TaskPool


@contextmanager
def shown_panel(qtbot: Any, path: Path, size: tuple[int, int] | None = None) -> Iterator[SqlPanel]:
    """The panel on its own pool; afterwards its query stops, the pool joins and the file is let go."""
    pool = TaskPool()
    db = open_readonly(path)
    panel = SqlPanel(db, pool)
    qtbot.addWidget(panel)
    if size is not None:
        panel.resize(*size)
    panel.show()
    try:
        yield panel
    finally:
        panel.stop()
        assert pool.shutdown()
        panel.release()
        db.close()
