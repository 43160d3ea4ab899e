"""The query-history panel: hand-run SQL listed, searched, persisted, rerun; clearing conversations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from sqale_desktop.core.history import History
from sqale_desktop.core.query_history import QueryRun
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.conversations_dialog import ConversationsDialog
from sqale_desktop.ui.main_window import MainWindow
from sqale_desktop.ui.query_history import QueryHistoryPanel
from tests.ui.windows import open_page


def test_panel_lists_newest_first_and_searches(qtbot: Any, qtmodeltester: Any) -> None:
    panel = QueryHistoryPanel()
    qtbot.addWidget(panel)
    start = datetime(2026, 1, 2, 10, 0, tzinfo=UTC)
    panel.set_runs(
        [
            QueryRun("SELECT * FROM Artist", start, "chinook.sqlite", 4, 275),
            QueryRun(
                "SELECT nope", start + timedelta(minutes=1), "chinook.sqlite", 1, None, "no such column"
            ),
        ]
    )
    panel.add_run(
        QueryRun("SELECT count(*) FROM Album", start + timedelta(minutes=2), "chinook.sqlite", 2, 1)
    )
    assert [r.sql for r in panel.shown_runs()] == [
        "SELECT count(*) FROM Album",
        "SELECT nope",
        "SELECT * FROM Artist",
    ]
    model = panel.model
    assert [model.headerData(c, Qt.Orientation.Horizontal) for c in range(5)] == [
        "Time",
        "Query",
        "Rows",
        "Duration",
        "Database",
    ]
    assert [model.index(r, 2).data() for r in range(3)] == ["1 row", "⚠ error", "275 rows"]
    assert model.index(0, 3).data() == "2 ms" and model.index(0, 4).data() == "chinook.sqlite"
    qtmodeltester.check(model)
    qtbot.keyClicks(panel.search, "artist")
    assert [r.sql for r in panel.shown_runs()] == ["SELECT * FROM Artist"]
    qtmodeltester.check(panel.proxy)
    panel.search.setText("column")
    assert [r.sql for r in panel.shown_runs()] == ["SELECT nope"]
    panel.search.clear()
    assert len(panel.shown_runs()) == 3
    assert not panel.rerun_button.isEnabled()
    panel.select_row(2)
    assert panel.rerun_button.isEnabled()
    with qtbot.waitSignal(panel.rerun_requested) as rerun:
        panel.rerun_button.click()
    assert rerun.args == ["SELECT * FROM Artist"]
    with qtbot.waitSignal(panel.open_requested) as opened:
        panel.open_button.click()
    assert opened.args == ["SELECT * FROM Artist"]


def _window(qtbot: Any, store: Path) -> MainWindow:
    window = MainWindow(Settings(), None, history=History(store))
    qtbot.addWidget(window)
    window.show()
    return window


def test_history_is_persisted_rerun_and_cleared(qtbot: Any, chinook: Path, tmp_path: Path) -> None:
    store = tmp_path / "history.sqlite"
    window = _window(qtbot, store)
    page = open_page(qtbot, window, chinook)
    for sql in ("SELECT Name FROM Genre WHERE GenreId = 1", "SELECT Title FROM Album LIMIT 3"):
        with qtbot.waitSignal(page.sql.user_ran, timeout=10_000):
            page.sql.run(sql)
    with qtbot.waitSignal(page.sql.user_ran, timeout=10_000):
        page.sql.run("SELECT nope FROM Genre")
    # A table preview from the schema tree is not a hand-run query.
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        page.preview_table("Genre")
    shown = page.sql.history.shown_runs()
    assert [r.sql for r in shown] == [
        "SELECT nope FROM Genre",
        "SELECT Title FROM Album LIMIT 3",
        "SELECT Name FROM Genre WHERE GenreId = 1",
    ]
    assert shown[0].error and "nope" in shown[0].error and shown[1].row_count == 3
    assert window.shutdown()
    window.close()

    again = _window(qtbot, store)
    restored = open_page(qtbot, again, chinook)
    runs = restored.sql.history.shown_runs()
    assert [r.sql for r in runs] == [r.sql for r in shown]
    assert [r.row_count for r in runs] == [None, 3, 1]
    assert all(r.duration_ms is not None and r.database == chinook.name for r in runs)
    # Run again from the panel: the grid shows it, and the run is listed (and stored) once more.
    restored.sql.views.setCurrentWidget(restored.sql.history)
    restored.sql.history.select_row(2)
    with qtbot.waitSignal(restored.sql.user_ran, timeout=10_000):
        restored.sql.history.rerun_button.click()
    assert restored.sql.views.currentWidget() is restored.sql.result_tab
    assert restored.sql.model is not None and restored.sql.model.rowCount() == 1
    assert restored.sql.history.shown_runs()[0].sql == "SELECT Name FROM Genre WHERE GenreId = 1"
    # Open in the editor.
    restored.sql.history.select_row(1)
    restored.sql.history.open_button.click()
    assert restored.sql.editor.sql() == "SELECT nope FROM Genre"

    # Clear the conversation: the panel empties and the store forgets it.
    assert again.clear_conversation(restored, confirm=False)
    assert restored.sql.history.shown_runs() == []
    assert again.history is not None and restored.conversation_id is not None
    assert again.history.entries(restored.conversation_id) == []
    assert again.shutdown()


def test_stored_conversations_dialog_deletes_one(
    qtbot: Any, chinook: Path, northwind: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    store = tmp_path / "history.sqlite"
    window = _window(qtbot, store)
    page = open_page(qtbot, window, chinook)
    with qtbot.waitSignal(page.sql.user_ran, timeout=10_000):
        page.sql.run("SELECT 1")
    history = window.history
    assert history is not None
    other = history.conversation_for(northwind)
    history.add_rerun(other.id, "SELECT 2")
    dialog = ConversationsDialog(history, window)
    qtbot.addWidget(dialog)
    titles = [dialog.list.item(i).text().split("  —  ")[0] for i in range(dialog.list.count())]
    assert sorted(titles) == sorted([chinook.name, northwind.name])
    row = titles.index(chinook.name)
    dialog.list.item(row).setSelected(True)
    dialog.deleted.connect(window.conversations.conversation_deleted)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    assert dialog.delete_selected() == 1
    # The open database starts a fresh, empty conversation; the other one keeps its query.
    left = {c.title: history.entries(c.id) for c in history.list_conversations()}
    assert left[chinook.name] == [] and [e.sql for e in left[northwind.name]] == ["SELECT 2"]
    assert page.sql.history.shown_runs() == []  # the open page's list emptied too
    assert page.conversation_id != other.id and history.entries(page.conversation_id or 0) == []
    assert window.shutdown()
