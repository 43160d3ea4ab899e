"""First run: the app opens on the generated demo shop and offers the model download."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from sqale_desktop.core.demo import DEMO_QUESTIONS
from sqale_desktop.ui.app import build_main_window, create_application
from sqale_desktop.ui.database_page import DatabasePage


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
    assert page.chat.suggestions.isHidden()  # the SQL run is now in the conversation
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
    assert film.text() == "film  — 1,000 rows"
    qtmodeltester.check(model)
