"""The schema browser: natural order, the filter box over tables and columns, widths, the table menu."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from natsort import natsorted, ns
from PySide6.QtCore import QModelIndex, QPoint, Qt
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import QMenu, QStyle, QStyleOptionViewItem

from sqale_desktop.core.db.connection import open_readonly
from sqale_desktop.core.db.introspect import ColumnInfo, Schema, TableInfo, load_schema
from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.schema_tree import KIND_ROLE, TABLE_ROLE, SchemaBrowser, SchemaModel, SchemaTree
from sqale_desktop.ui.workers import TaskPool
from tests.helpers import shared_data

POWERLOG = "awkward/ios__powerlog_84E2141B.PLSQL.sqlite"
ISTAT = "files/csv/frictionless__issue-811.csv"


def _table(name: str, *columns: str, kind: str = "table") -> TableInfo:
    cols = [ColumnInfo(c, "TEXT", False, None, 0) for c in columns]
    return TableInfo(name=name, kind=kind, sql=f'CREATE TABLE "{name}" (x)', columns=cols)


def _schema() -> Schema:
    return Schema(
        [
            _table("table10", "id"),
            _table("Table2", "id", "customer_email"),
            _table("table1", "id"),
            _table("zeta", "Amount"),
            _table("Apple", "id", "EMAIL"),
            _table("orders_view", "total", kind="view"),
        ]
    )


def _browser(qtbot: Any, schema: Schema) -> SchemaBrowser:
    model = SchemaModel()
    model.set_schema(schema)
    browser = SchemaBrowser(model)
    qtbot.addWidget(browser)
    return browser


def _names(browser: SchemaBrowser) -> list[str]:
    return browser.visible_tables()


def _children(browser: SchemaBrowser, table: str) -> list[str]:
    return browser.visible_columns(table)


def test_tables_sort_naturally_and_ignoring_case(qtbot: Any, qtmodeltester: Any) -> None:
    browser = _browser(qtbot, _schema())
    assert browser.model.tables() == ["Apple", "orders_view", "table1", "Table2", "table10", "zeta"]
    assert _names(browser) == browser.model.tables()
    # Columns keep the order they were declared in.
    assert _children(browser, "Table2") == ["id", "customer_email"]
    qtmodeltester.check(browser.model)
    qtmodeltester.check(browser.tree.proxy)


def test_filter_matches_table_names_and_column_names_in_any_case(qtbot: Any, qtmodeltester: Any) -> None:
    browser = _browser(qtbot, _schema())
    browser.show()
    qtbot.keyClicks(browser.filter_box, "TABLE")
    assert _names(browser) == ["table1", "Table2", "table10"]
    # A table found by its name shows all of its columns.
    assert _children(browser, "Table2") == ["id", "customer_email"]
    assert browser.status.text() == "3 of 6 tables and views"

    browser.filter_box.setText("email")
    assert _names(browser) == ["Apple", "Table2"]
    # A table found through a column shows just the matching columns, expanded.
    assert _children(browser, "Apple") == ["EMAIL"]
    assert _children(browser, "Table2") == ["customer_email"]
    first = browser.tree.proxy.index(0, 0)
    assert browser.tree.isExpanded(first)
    qtmodeltester.check(browser.tree.proxy)

    browser.filter_box.setText("nothing like it")
    assert _names(browser) == []
    assert browser.status.text() == "No table or column matches"
    browser.filter_box.setText("a.b*[")  # not a pattern: matched as typed
    assert _names(browser) == []
    browser.filter_box.clear()
    assert len(_names(browser)) == 6 and browser.status.isHidden()


def test_ctrl_f_in_the_tree_goes_to_the_filter_and_escape_clears_it(qtbot: Any) -> None:
    browser = _browser(qtbot, _schema())
    browser.show()
    browser.activateWindow()
    qtbot.waitUntil(browser.isActiveWindow)
    browser.tree.setFocus()
    qtbot.keyClick(browser.tree, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert browser.filter_box.hasFocus()
    qtbot.keyClicks(browser.filter_box, "zet")
    assert _names(browser) == ["zeta"]
    qtbot.keyClick(browser.filter_box, Qt.Key.Key_Escape)
    assert browser.filter_box.text() == "" and len(_names(browser)) == 6


def test_long_names_elide_in_the_middle_and_counts_stay_visible(qtbot: Any) -> None:
    long_name = "PLBatteryAgent_EventBackward_BatteryConfigurationAndSomeMoreWords_" + "x" * 40
    browser = _browser(qtbot, Schema([_table(long_name, "id"), _table("t", "id")]))
    browser.model.set_row_count(long_name, 12_345_678)
    browser.resize(180, 300)
    browser.show()
    qtbot.waitExposed(browser)
    tree = browser.tree
    assert tree.textElideMode() == Qt.TextElideMode.ElideMiddle
    first = tree.proxy.index(0, 0)
    assert first.data(Qt.ItemDataRole.ToolTipRole).startswith(long_name)
    count = tree.proxy.index(0, 1)
    assert count.data() == "12,345,678"
    assert count.data(Qt.ItemDataRole.ToolTipRole) == "12,345,678 rows"
    header = tree.header()
    needed = tree.fontMetrics().horizontalAdvance("12,345,678")
    assert header.sectionSize(1) >= needed
    assert header.sectionPosition(1) + header.sectionSize(1) <= tree.viewport().width()


def _page(qtbot: Any, path: Path) -> tuple[DatabasePage, TaskPool]:
    pool = TaskPool()
    db = open_readonly(path)
    page = DatabasePage(db, load_schema(db), pool)
    qtbot.addWidget(page)
    return page, pool


def _close(page: DatabasePage, pool: TaskPool) -> None:
    page.close_database()
    assert pool.shutdown()
    page.release()


def _action(menu: QMenu, text: str) -> QAction:
    for action in menu.actions():
        if action.text().startswith(text):
            return action
    raise AssertionError(f"no action {text!r} in {[a.text() for a in menu.actions()]}")


def _index_of(page: DatabasePage, table: str) -> QModelIndex:
    proxy = page.schema_tree.proxy
    for row in range(proxy.rowCount()):
        if proxy.index(row, 0).data(TABLE_ROLE) == table:
            return proxy.index(row, 0)
    raise AssertionError(table)


def test_table_menu_copies_previews_and_shows_the_create_statement(qtbot: Any, northwind: Path) -> None:
    page, pool = _page(qtbot, northwind)
    try:
        index = _index_of(page, "Order Details")
        menu = page.schema_tree.menu_for(index)
        assert menu is not None
        assert [a.text() for a in menu.actions() if not a.isSeparator()] == [
            "Preview rows",
            "Copy name",
            "Copy SELECT * … LIMIT 100",
            "Show CREATE statement",
        ]
        _action(menu, "Copy name").trigger()
        assert QGuiApplication.clipboard().text() == "Order Details"
        _action(menu, "Copy SELECT").trigger()
        assert QGuiApplication.clipboard().text() == 'SELECT * FROM "Order Details" LIMIT 100'

        # A column's row offers the same, for its table.
        column = page.schema_tree.proxy.index(0, 0, index)
        assert column.data(KIND_ROLE) == "column"
        column_menu = page.schema_tree.menu_for(column)
        assert column_menu is not None
        _action(column_menu, "Copy name").trigger()
        assert QGuiApplication.clipboard().text() == "Order Details"

        _action(menu, "Show CREATE statement").trigger()
        dialog = page.schema_tree.create_dialog
        assert dialog is not None and dialog.isVisible()
        editor = dialog.findChild(object, "createStatement")
        assert "CREATE TABLE" in editor.toPlainText() and "Order Details" in editor.toPlainText()
        dialog.close()

        with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
            _action(menu, "Preview rows").trigger()
        assert '"Order Details"' in page.sql.editor.sql()
        assert page.sql.model is not None and page.sql.model.rowCount() > 0
        assert page.schema_tree.menu_for(QModelIndex()) is None
    finally:
        _close(page, pool)


def test_powerlog_with_367_tables_sorts_filters_and_counts(qtbot: Any, qtmodeltester: Any) -> None:
    page, pool = _page(qtbot, shared_data(POWERLOG))
    try:
        names = page.schema_model.tables()
        assert len(names) >= 300
        assert names == natsorted(names, alg=ns.IGNORECASE)
        assert names != sorted(names)  # mixed-case names: a plain sort would order them otherwise
        browser = page.schema_browser
        browser.filter_box.setText("battery")
        shown = browser.visible_tables()
        assert shown and len(shown) < len(names)
        for table in shown:
            info = page.schema_model.table(table)
            assert info is not None
            assert "battery" in table.lower() or any("battery" in c.name.lower() for c in info.columns)
        qtmodeltester.check(browser.tree.proxy)
        # Row counts arrive one table at a time, in the Rows column.
        first = page.schema_model.countable_tables()[0]
        qtbot.waitUntil(lambda: page.schema_model.row_count_text(first) is not None, timeout=20_000)
    finally:
        _close(page, pool)


@pytest.mark.parametrize("count", [5000])
def test_five_thousand_tables_filter_to_the_right_ones(qtbot: Any, count: int) -> None:
    schema = Schema([_table(f"t_{i}", "id", f"col_{i % 97}") for i in range(count)])
    browser = _browser(qtbot, schema)
    assert browser.model.tables()[:3] == ["t_0", "t_1", "t_2"]
    assert browser.model.tables()[-1] == f"t_{count - 1}"
    browser.filter_box.setText("t_499")
    assert _names(browser) == ["t_499", *[f"t_{4990 + i}" for i in range(10)]]
    browser.filter_box.setText("col_96")
    assert len(_names(browser)) == len([i for i in range(count) if i % 97 == 96])


def shown_texts(tree: SchemaTree) -> list[str]:
    """The text each table row in sight is painted with (what the name delegate hands the style)."""
    delegate = tree.itemDelegateForColumn(0)
    texts = []
    for row in range(tree.proxy.rowCount()):
        index = tree.proxy.index(row, 0)
        rect = tree.visualRect(index)
        if rect.bottom() < 0 or rect.top() > tree.viewport().height():
            continue
        option = QStyleOptionViewItem()
        tree.initViewItemOption(option)
        option.rect = rect
        delegate.initStyleOption(option, index)
        texts.append(option.text)
    return texts


def test_powerlog_names_are_told_apart_at_the_default_width(qtbot: Any, artifacts: Path) -> None:
    page, pool = _page(qtbot, shared_data(POWERLOG))
    try:
        page.resize(1360, 780)  # the window's default size: the schema pane keeps its 230 px
        page.show()
        qtbot.waitExposed(page)
        tree = page.schema_tree
        tree.setFocus()
        seen = 0
        while True:  # page by page, as a person reads the list: no two names in sight read alike
            texts = shown_texts(tree)
            assert len(set(texts)) == len(texts), texts
            seen += sum("…" in text for text in texts)
            bar = tree.verticalScrollBar()
            if bar.value() == bar.maximum():
                break
            qtbot.keyClick(tree, Qt.Key.Key_PageDown)
        assert seen > 50  # the width does shorten names
        qtbot.keyClicks(page.schema_browser.filter_box, "PLAccountingOperator")
        shown = shown_texts(page.schema_tree)
        assert len(shown) == 25 and len(set(shown)) == 25
        assert "Backward_PowerEvents" in " ".join(shown) and "Forward_PowerEvents" in " ".join(shown)
        page.grab().save(str(artifacts / "schema_powerlog_default_width.png"))
    finally:
        _close(page, pool)


def painted_rows(tree: SchemaTree) -> list[tuple[str, str]]:
    """(name, text) of each table and column row in sight, the text as the style paints it: the
    delegate's, cut by the style itself (in the middle) only where it does not fit, as Qt's
    ``viewItemDrawText`` does."""
    delegate = tree.itemDelegateForColumn(0)
    style = tree.style()
    margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, tree) + 1
    rows = []
    index = tree.indexAt(QPoint(0, 0))
    while index.isValid() and tree.visualRect(index).top() <= tree.viewport().height():
        option = QStyleOptionViewItem()
        tree.initViewItemOption(option)
        option.rect = tree.visualRect(index)
        delegate.initStyleOption(option, index)
        room = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, option, tree).width() - 2 * margin
        text, metrics = option.text, option.fontMetrics
        if metrics.horizontalAdvance(text) > room:
            text = metrics.elidedText(text, option.textElideMode, room)
        if index.data(KIND_ROLE) != "error":
            rows.append((str(index.data(TABLE_ROLE)), text))
        index = tree.indexBelow(index)
    return rows


def read_alike(rows: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """Rows in sight whose names differ and whose painted texts are the same: (text, name, name)."""
    first: dict[str, str] = {}
    alike = []
    for name, text in rows:
        if first.setdefault(text, name) != name:
            alike.append((text, first[text], name))
    return alike


def open_by_keyboard(qtbot: Any, page: DatabasePage, table: str) -> None:
    """Click the table's row, then the Right arrow: the table opens on its columns."""
    tree = page.schema_tree
    qtbot.mouseClick(
        tree.viewport(), Qt.MouseButton.LeftButton, pos=tree.visualRect(_index_of(page, table)).center()
    )
    qtbot.keyClick(tree, Qt.Key.Key_Right)
    assert tree.isExpanded(_index_of(page, table))


def test_istat_columns_read_apart_at_the_default_width(qtbot: Any, artifacts: Path) -> None:
    """The real ISTAT file (frictionless-py issue 811), imported as the app imports it: its long
    Italian column names, with their type behind them, read alike cut in the middle
    (``Codice NU…021  TEXT`` for NUTS1 and NUTS3 2021)."""
    from sqale_desktop.core.imports import import_source

    page, pool = _page(qtbot, import_source(shared_data(ISTAT)).db_path)
    try:
        page.resize(1360, 780)  # the window's default size: the schema pane keeps its 230 px
        page.show()
        qtbot.waitExposed(page)
        open_by_keyboard(qtbot, page, "frictionless__issue-811")
        tree = page.schema_tree
        shown: dict[str, str] = {}
        while True:  # page by page, as a person reads the list
            rows = painted_rows(tree)
            assert read_alike(rows) == []
            shown.update(rows)
            bar = tree.verticalScrollBar()
            if bar.value() == bar.maximum():
                break
            qtbot.keyClick(tree, Qt.Key.Key_PageDown)
        assert len(shown) == 27  # the table and its 26 columns
        assert sum("…" in text for text in shown.values()) > 10  # the width does shorten names
        years = [shown[f"Codice Comune numerico con {n} province (dal {y})"] for n, y in ISTAT_YEARS]
        assert [text[-len(y) - 1 :] for text, (_n, y) in zip(years, ISTAT_YEARS, strict=True)] == [
            f"{y})" for _n, y in ISTAT_YEARS
        ]
        tree.scrollToTop()
        page.grab().save(str(artifacts / "schema_istat_default_width.png"))
    finally:
        _close(page, pool)


ISTAT_YEARS = [(110, "2010 al 2016"), (107, "2006 al 2009"), (103, "1995 al 2005")]


def test_foreign_key_columns_read_apart_at_the_default_width(qtbot: Any) -> None:
    """PROJ's registry: a foreign key's target behind each column made ``celestial_body_auth_name``
    and ``celestial_body_code`` both read ``celestial…NOT NULL]``.  The key gives way first."""
    page, pool = _page(qtbot, shared_data("awkward/proj_9.1.1.db"))
    try:
        page.resize(1360, 780)
        page.show()
        qtbot.waitExposed(page)
        qtbot.keyClicks(page.schema_browser.filter_box, "ellipsoid")
        open_by_keyboard(qtbot, page, "ellipsoid")
        rows = painted_rows(page.schema_tree)
        assert read_alike(rows) == []
        shown = dict(rows)
        assert shown["celestial_body_code"].startswith("celestial_body_code")
        assert shown["celestial_body_auth_name"].endswith("body_auth_name")
        assert shown["uom_auth_name"].startswith("uom_auth_name") and shown["uom_code"].startswith("uom_code")
    finally:
        _close(page, pool)


def test_a_name_match_stays_collapsed_and_a_column_match_opens(qtbot: Any, chinook: Path) -> None:
    page, pool = _page(qtbot, chinook)
    try:
        page.resize(1200, 700)
        page.show()
        browser, tree = page.schema_browser, page.schema_tree
        qtbot.keyClicks(browser.filter_box, "track")
        assert {"Track", "PlaylistTrack", "InvoiceLine"} <= set(browser.visible_tables())
        # Found by their names: collapsed, so two matches do not fill the pane with columns.
        assert not tree.isExpanded(_index_of(page, "Track"))
        assert not tree.isExpanded(_index_of(page, "PlaylistTrack"))
        # Found through a column: open, with just that column.
        assert tree.isExpanded(_index_of(page, "InvoiceLine"))
        assert _children(browser, "InvoiceLine") == ["TrackId"]
        qtbot.keyClicks(browser.filter_box, "id")  # "trackid": Track is now a column match
        assert tree.isExpanded(_index_of(page, "Track")) and _children(browser, "Track") == ["TrackId"]
    finally:
        _close(page, pool)


def test_preview_rows_brings_the_rows_to_the_front(qtbot: Any, chinook: Path) -> None:
    page, pool = _page(qtbot, chinook)
    try:
        page.resize(1200, 700)
        page.show()
        qtbot.waitExposed(page)
        tree = page.schema_tree
        page.sql.views.setCurrentWidget(page.sql.history)
        rect = tree.visualRect(_index_of(page, "Album"))
        with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
            # A double click as the system delivers it: the first click, then the double click
            # (QTest's double click alone lacks the first press the item view looks for).
            qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
            qtbot.mouseDClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        assert page.sql.views.currentWidget() is page.sql.result_tab
        assert page.sql.model is not None and page.sql.model.rowCount() > 0
        page.sql.views.setCurrentWidget(page.sql.history)
        menu = tree.menu_for(_index_of(page, "Artist"))
        assert menu is not None
        with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
            _action(menu, "Preview rows").trigger()
        assert page.sql.views.currentWidget() is page.sql.result_tab and "Artist" in page.sql.editor.sql()
    finally:
        _close(page, pool)


def test_an_imported_file_shows_its_tables_and_original_names_not_the_note(
    qtbot: Any, tmp_path: Path
) -> None:
    """The ``_columns`` note is no table of the tree; a renamed column's tooltip names the original,
    and the note still answers a query."""
    from sqale_desktop.core.imports import import_source

    source = tmp_path / "odd.csv"
    source.write_text("id,,Name,name\n1,a,b,c\n", encoding="utf-8")
    page, pool = _page(qtbot, import_source(source).db_path)
    try:
        assert page.schema_browser.visible_tables() == ["odd"]
        table = _index_of(page, "odd")
        page.schema_tree.expand(table)
        tips = [page.schema_tree.proxy.index(r, 0, table).data(Qt.ItemDataRole.ToolTipRole) for r in range(4)]
        assert "In the imported file" not in tips[0] and "In the imported file" not in tips[2]
        assert tips[1].endswith("In the imported file: (no name)")
        assert tips[3].endswith("In the imported file: “name”")
        page.sql.editor.set_sql("SELECT original_name FROM _columns WHERE column_name = 'name_2'")
        with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
            page.sql.run()
        assert page.sql.model is not None and page.sql.model.rowCount() == 1
    finally:
        _close(page, pool)
