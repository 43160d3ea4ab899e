"""First run: the app opens on the generated demo shop and offers the model download; files given
on the command line open in tabs instead (what "Open with" and `sqale-desktop FILE...` do)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from sqale_desktop.core.demo import DEMO_QUESTIONS
from sqale_desktop.ui.app import QUIT_AFTER_SHOWN_ENV, LaunchOpener, build_main_window, create_application
from sqale_desktop.ui.database_page import DatabasePage
from tests.commands.subprocess_cli import run_cli


def test_first_run_opens_the_demo_and_offers_a_model(qtbot: Any) -> None:
    app = create_application([])
    assert app.applicationName() == "SQaLe Desktop"
    window = build_main_window(first_run_offer=True)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: len(window.pages()) == 1, timeout=20_000)
    page = window.pages()[0]
    assert isinstance(page, DatabasePage)
    assert page.path.name == "shop.sqlite"
    tables = set(page.schema_model.tables())
    assert {"suppliers", "shipments", "orders", "order_items", "customers", "products"} <= tables
    qtbot.waitUntil(window.offer.isVisible, timeout=5_000)
    assert not page.chat.ask_button.isEnabled()  # no model: asking says why, SQL still works
    # The demo suggests questions it has real answers to; one click puts it in the question box.
    suggestions = page.chat.suggestions.findChildren(QPushButton)
    assert [b.text() for b in suggestions] == [q.question for q in DEMO_QUESTIONS]
    assert page.chat.suggestions.isVisible()
    qtbot.mouseClick(suggestions[0], Qt.MouseButton.LeftButton)
    assert page.chat.question.toPlainText() == DEMO_QUESTIONS[0].question
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        page.sql.run("SELECT count(*) FROM suppliers")
    assert page.sql.model is not None and page.sql.model.rowCount() == 1
    # Hand-run SQL goes to the query history: the chat (and its suggestions) stays as it was.
    assert [run.sql for run in page.sql.history.shown_runs()] == ["SELECT count(*) FROM suppliers"]
    assert page.chat.reruns == []
    assert window.shutdown()


def test_other_databases_get_no_demo_suggestions(qtbot: Any, chinook: Any) -> None:
    from sqale_desktop.core.db.connection import open_readonly
    from sqale_desktop.core.db.introspect import load_schema
    from sqale_desktop.ui.workers import TaskPool

    pool = TaskPool()
    with open_readonly(chinook) as db:
        page = DatabasePage(db, load_schema(db), pool)
        qtbot.addWidget(page)
        assert page.chat.suggestions.findChildren(QPushButton) == []
        assert not page.chat.suggestions.isVisibleTo(page)
        pool.shutdown()


def test_schema_model_passes_qtmodeltester(qtbot: Any, qtmodeltester: Any, sakila: Any) -> None:
    from sqale_desktop.core.db.connection import open_readonly
    from sqale_desktop.core.db.introspect import load_schema
    from sqale_desktop.ui.schema_tree import KIND_ROLE, SchemaModel

    with open_readonly(sakila) as db:
        schema = load_schema(db)
    model = SchemaModel()
    model.set_schema(schema)
    qtmodeltester.check(model)
    names = model.tables()
    assert "film" in names and "actor" in names
    film = model.item(names.index("film"))
    assert film.data(KIND_ROLE) == "table"
    columns = [film.child(r).text() for r in range(film.rowCount())]
    assert any(c.startswith("film_id") and "PK" in c for c in columns)
    assert any(c.startswith("language_id") and "FK → language" in c for c in columns)
    views = [n for n in names if model.item(names.index(n)).data(KIND_ROLE) == "view"]
    assert views and "(view)" in model.item(names.index(views[0])).text()
    model.set_row_count("film", 1000)
    assert film.text() == "film"
    assert model.item(names.index("film"), 1).text() == "1,000"
    qtmodeltester.check(model)


def _launch(qtbot: Any, files: list[Path]) -> tuple[Any, LaunchOpener]:
    create_application([])
    window = build_main_window(first_run_offer=False, open_demo=False)
    qtbot.addWidget(window)
    opener = LaunchOpener(window, files)
    window.show()
    settled: list[bool] = []
    opener.when_settled(lambda: settled.append(True))
    qtbot.waitUntil(lambda: bool(settled), timeout=20_000)
    return window, opener


def test_launch_files_open_in_tabs_and_a_bad_one_gets_the_open_message(
    qtbot: Any, chinook: Path, northwind: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "notes.db"
    bad.write_text("not a database", encoding="utf-8")
    missing = tmp_path / "missing.sqlite"
    window, opener = _launch(qtbot, [chinook, bad, northwind, missing, chinook])
    assert sorted(p.path.name for p in window.pages()) == ["chinook.sqlite", "northwind.sqlite"]
    assert len(opener.errors) == 2
    assert any("notes.db is not a SQLite database" in e for e in opener.errors)
    assert any("missing.sqlite" in e for e in opener.errors)
    # Ctrl+O's banner and wording, shown again after the good files' tabs opened (which hide it).
    assert sorted(m.split(":")[0] for m in opener.messages) == [
        "Could not open missing.sqlite",
        "Could not open notes.db",
    ]
    assert window.banner.isVisible()
    assert sorted(window.banner.text().splitlines()) == sorted(opener.messages)
    assert window.shutdown()


def test_the_demo_opens_only_when_no_launch_file_did(qtbot: Any, tmp_path: Path) -> None:
    window, opener = _launch(qtbot, [tmp_path / "gone.sqlite"])
    assert [p.path.name for p in window.pages()] == ["shop.sqlite"]
    assert len(opener.errors) == 1 and "gone.sqlite" in opener.errors[0]
    assert window.banner.isVisible() and window.banner.text().startswith("Could not open gone.sqlite:")
    assert window.shutdown()


def test_the_command_line_opens_a_file_and_the_quit_hook_reports_its_tabs(chinook: Path) -> None:
    """The real entry point in a child process: window shown, chinook's tab, then quit by the hook."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", **{QUIT_AFTER_SHOWN_ENV: "1"})
    done = run_cli(str(chinook), env=env)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [e["event"] for e in events] == ["shown", "ready"]
    assert events[0]["visible"] is True
    assert events[1]["tabs"] == [str(chinook)] and events[1]["errors"] == []
    assert "Traceback" not in done.stderr
