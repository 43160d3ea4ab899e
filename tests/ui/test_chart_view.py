"""The Chart view: the kind chosen per column mix, rendered with axis titles, switchable, exported;
the answer card's Chart button; screenshots of the data side in both palettes."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QItemSelectionModel, QPoint, QPointF, QRectF
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication

from sqale_desktop.ui.chart_view import ChartView, write_export
from sqale_desktop.ui.palette import apply_theme
from sqale_desktop.ui.sql_panel import SqlPanel
from tests.ui.sql_panels import shown_panel
from tests.ui.windows import WindowFactory, open_page


def painted_pixels(image: QImage, background: QColor) -> int:
    """Pixels that differ from the background, on a coarse grid (enough to tell drawn from blank)."""
    count = 0
    for y in range(0, image.height(), 4):
        for x in range(0, image.width(), 4):
            if image.pixelColor(x, y).rgb() != background.rgb():
                count += 1
    return count


def chart(qtbot: Any) -> ChartView:
    view = ChartView()
    qtbot.addWidget(view)
    view.resize(800, 480)
    view.show()
    return view


def settle(qtbot: Any, view: ChartView) -> None:
    """Until the category axis has the height its upright names asked the plot's layout for."""
    axis = view.plot.getPlotItem().getAxis("bottom")
    qtbot.waitUntil(lambda: bool(axis.labels) and axis.height() == axis.maximumHeight(), timeout=5000)


def axis_titles(view: ChartView) -> tuple[str, str]:
    plot = view.plot.getPlotItem()
    return plot.getAxis("bottom").labelText, plot.getAxis("left").labelText


def test_kind_follows_the_column_mix_and_renders_with_axis_titles(qtbot: Any) -> None:
    view = chart(qtbot)
    view.set_data(["genre", "tracks"], [["Rock", 1297], ["Latin", 579], ["Metal", 374]], True)
    assert view.plan is not None and view.plan.kind == "bar"
    assert axis_titles(view) == ("genre", "tracks")
    assert view.status.text() == "Bar chart of tracks by genre, from all 3 rows."
    ticks = view.plot.getPlotItem().getAxis("bottom")._tickLevels
    assert [label for _x, label in ticks[0]] == ["Rock", "Latin", "Metal"]
    background = view.plot.backgroundBrush().color()
    image = view.render_image(800)
    assert image.width() == 800 and painted_pixels(image, background) > 200

    view.set_data(["day", "orders"], [["2024-01-0" + str(d), d * 2] for d in range(1, 8)], False)
    assert view.plan is not None and view.plan.kind == "line"
    assert "from the 7 loaded rows (the result has more" in view.status.text()

    view.set_data(["price", "sold"], [[float(i), i * i] for i in range(50)], True)
    assert view.plan is not None and view.plan.kind == "scatter"
    assert axis_titles(view) == ("price", "sold")

    # Switchable: the kind box redraws the same columns another way, and stays for this result.
    view.kind_box.setCurrentIndex(1)
    view.kind_box.activated.emit(1)
    assert view.plan is not None and view.plan.kind == "line"
    view.set_data(["price", "sold"], [[float(i), i] for i in range(60)], True)
    assert view.plan.kind == "line"

    # A big scatter draws an evenly spaced sample, and says so.
    many = [[float(i), float(i % 7)] for i in range(60_000)]
    view.set_data(["price", "sold"], many, True, "scatter")
    [scatter] = [i for i in view.plot.getPlotItem().items if hasattr(i, "points")]
    assert len(scatter.data) == 20_000
    assert view.status.text().endswith("from one row in 3 of all 60,000 rows.")

    view.set_data(["name"], [["a"]], True)
    assert view.plan is None and "no numeric column" in view.status.text()
    assert not view.png_button.isEnabled()


@pytest.fixture
def panel(qtbot: Any, chinook: Path) -> Iterator[SqlPanel]:
    with shown_panel(qtbot, chinook, (1000, 700)) as panel:
        yield panel


def test_chart_tab_draws_the_loaded_rows_and_exports_png_and_svg(
    qtbot: Any, panel: SqlPanel, tmp_path: Path
) -> None:
    assert panel.chart is None  # pyqtgraph is only loaded when the tab is first shown
    with qtbot.waitSignal(panel.query_finished, timeout=10_000):
        panel.run("SELECT TrackId, Milliseconds / 1000.0 AS seconds FROM Track")
    view = panel.show_chart()
    assert view.plan is not None and view.plan.kind == "scatter"
    assert "from the 500 loaded rows" in view.status.text()
    # Scrolling the grid loads more rows; the chart follows.
    model = panel.model
    assert model is not None
    model.fetchMore()
    assert "from the 1,000 loaded rows" in view.status.text()

    png = tmp_path / "chart.png"
    with qtbot.waitSignal(panel.export_finished, timeout=10_000):
        panel.export_chart(png, "png")
    image = QImage(str(png))
    assert not image.isNull() and image.width() >= 800
    assert painted_pixels(image, view.plot.backgroundBrush().color()) > 200
    svg = tmp_path / "chart.svg"
    with qtbot.waitSignal(panel.export_finished, timeout=10_000):
        panel.export_chart(svg, "svg")
    text = svg.read_text(encoding="utf-8")
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "seconds" in text


def test_answer_card_offers_chart_and_shows_it(qtbot: Any, make_window: WindowFactory, chinook: Path) -> None:
    window = make_window()
    page = open_page(qtbot, window, chinook)
    page.chat.question.setPlainText("Which artists have the most albums?")
    with (
        qtbot.waitSignal(page.sql.query_finished, timeout=10_000),  # then its answer runs in the grid
        qtbot.waitSignal(window.episode_finished, timeout=20_000),  # waited for first (exits first)
    ):
        page.chat.ask_button.click()
    answer = page.chat.episodes[0].answer
    assert answer is not None and answer.chartable  # albums is numeric
    assert answer.details.text().endswith('<a href="chart">Chart</a>')
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        answer.details.linkActivated.emit("chart")
    assert page.sql.views.currentWidget() is page.sql.chart_tab
    assert page.sql.chart is not None and page.sql.chart.plan is not None
    assert page.sql.chart.plan.kind == "bar" and axis_titles(page.sql.chart) == ("Name", "albums")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_screenshots_of_the_data_side(
    qtbot: Any,
    make_window: WindowFactory,
    chinook: Path,
    artifacts: Path,
    theme: str,
    themed: None,
) -> None:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app, theme)  # type: ignore[arg-type]
    window = make_window([])
    page = open_page(qtbot, window, chinook)
    page.schema_browser.filter_box.setText("name")
    sql = (
        "SELECT g.Name AS genre, count(*) AS tracks, round(sum(t.Milliseconds) / 60000.0) AS minutes "
        "FROM Track t JOIN Genre g USING (GenreId) GROUP BY 1 ORDER BY 2 DESC"
    )
    with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
        page.sql.run(sql)
    with qtbot.waitSignal(page.sql.user_ran, timeout=10_000):
        page.sql.run("SELECT Name, Composer FROM Track WHERE Composer IS NULL LIMIT 5")
    with qtbot.waitSignal(page.sql.user_ran, timeout=10_000):
        page.sql.run(sql)
    view = page.sql.show_chart()
    assert view.plan is not None and view.plan.kind == "bar"
    background = view.plot.backgroundBrush().color()
    assert (background.lightness() < 128) == (theme == "dark")
    for width, height in ((1024, 700), (1920, 1080)):
        window.resize(width, height)
        QApplication.processEvents()
        page.sql.views.setCurrentWidget(page.sql.chart_tab)
        settle(qtbot, view)
        window.grab().save(str(artifacts / f"data_chart_{theme}_{width}x{height}.png"))
        page.sql.views.setCurrentWidget(page.sql.result_tab)
        page.sql.grid.filter_requested.emit(0, "contains", "ro")
        selection = page.sql.grid.selectionModel()
        selection.select(page.sql.grid.model().index(0, 0), QItemSelectionModel.SelectionFlag.Select)
        QApplication.processEvents()
        window.grab().save(str(artifacts / f"data_grid_{theme}_{width}x{height}.png"))
        page.sql.filter_bar.clear()
        page.sql.views.setCurrentWidget(page.sql.history)
        QApplication.processEvents()
        window.grab().save(str(artifacts / f"data_history_{theme}_{width}x{height}.png"))
    image = view.render_image(1000)
    assert painted_pixels(image, background) > 200
    # Switching the palette re-colours the chart.
    apply_theme(app, "light" if theme == "dark" else "dark")
    page.refresh_palette()
    assert view.plot.backgroundBrush().color().lightness() != background.lightness()


CHINOOK_COUNTRIES = (
    "SELECT BillingCountry AS country, count(*) AS invoices, sum(Total) AS revenue "
    "FROM Invoice GROUP BY 1 ORDER BY 3 DESC"
)


def query(path: Path, sql: str) -> tuple[list[str], list[list[Any]]]:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        cursor = db.execute(sql)
        return [d[0] for d in cursor.description], [list(row) for row in cursor]


def bars(view: ChartView) -> list[tuple[Any, list[QRectF]]]:
    """Every bar item with the scene rectangle of each of its bars, read back from the plot."""
    import pyqtgraph as pg

    found = []
    for item in view.plot.getPlotItem().items:
        if isinstance(item, pg.BarGraphItem):
            xs, heights, width = item.opts["x"], item.opts["height"], item.opts["width"]
            rects = [
                item.mapRectToScene(QRectF(x - width / 2, 0.0, width, h).normalized())
                for x, h in zip(xs, heights, strict=True)
            ]
            found.append((item, rects))
    return found


def near(seen: QColor, colour: QColor, tolerance: int = 24) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(seen.getRgb()[:3], colour.getRgb()[:3], strict=True))


def hover_until(qtbot: Any, view: ChartView, where: Callable[[], QPointF], expected: str) -> None:
    """Move the pointer over the plot to ``where()`` (scene coordinates) until the readout says
    ``expected``: moved again on each try, as the plot's layout may still be settling, and a
    pixel aside every other time (Qt drops a move to where the pointer already is)."""
    tries = [0]

    def moved() -> bool:
        tries[0] += 1
        at = scene_to_viewport(view, where()) + QPoint(tries[0] % 2, 0)
        qtbot.mouseMove(view.plot.viewport(), at)
        return view.readout.text() == expected

    qtbot.waitUntil(moved, timeout=5000)


def scene_to_viewport(view: ChartView, point: QPointF) -> QPoint:
    return view.plot.mapFromScene(point)


def test_chinook_revenue_per_country_reads_without_the_table(
    qtbot: Any, chinook: Path, artifacts: Path, tmp_path: Path
) -> None:
    columns, rows = query(chinook, CHINOOK_COUNTRIES)
    assert len(rows) == 24 and rows[0][0] == "USA"
    view = chart(qtbot)
    view.set_data(columns, rows, True)
    axis = view.plot.getPlotItem().getAxis("bottom")
    # Every country is named under its bars (upright: 24 names do not fit side by side in 800 px),
    # once the plot has its size (the names are placed when the axis paints).
    qtbot.waitUntil(lambda: axis.labels == [row[0] for row in rows], timeout=5000)
    assert axis.upright and axis.every == 1
    view.grab().save(str(artifacts / "chart_chinook_countries.png"))
    # No scale prefix on the names' axis.
    assert axis.autoSIPrefixScale == 1.0 and "x0." not in axis.labelString()
    # Bar heights read back from the plot are the values.
    found = bars(view)
    assert [item.opts["name"] for item, _rects in found] == ["invoices", "revenue"]
    for n, (item, _rects) in enumerate(found):
        assert list(item.opts["height"]) == [row[n + 1] for row in rows]
    # The legend is outside the plot: its rectangle meets no bar.
    assert view.legend is not None
    legend = view.legend.sceneBoundingRect()
    assert legend.height() > 0
    assert not any(legend.intersects(rect) for _item, rects in found for rect in rects)
    # The exported PNG is the same scene: the top of every bar shows the bar's own colour.
    png = tmp_path / "countries.png"
    write_export(png, view.render_image(1600))
    image = QImage(str(png))
    scale = image.width() / view.plot.width()  # the image is the widget as shown, scaled
    for item, rects in found:
        colour = QColor(item.opts["brush"])
        for rect in rects:
            if rect.height() * scale < 6:
                continue
            top = view.plot.mapFromScene(QPointF(rect.center().x(), rect.top()))
            seen = image.pixelColor(int(top.x() * scale), int(top.y() * scale) + 4)
            # (the faint grid lines are drawn over the bars: close to the colour, not equal)
            assert near(seen, colour), (rect, seen.name(), colour.name())
    # Hovering the USA revenue bar reads out its exact values (not 523.0600000000003).
    usa_revenue = found[1][1][0]
    hover_until(qtbot, view, lambda: usa_revenue.center(), "country USA: invoices 91, revenue 523.06")
    view.grab().save(str(artifacts / "chart_chinook_hover.png"))
    # The SVG holds the names and the legend too.
    svg = view.svg_bytes().decode("utf-8")
    assert "United Kingdom" in svg and "revenue" in svg


def test_a_one_row_chart_names_its_category_whole_and_without_a_scale(qtbot: Any, artifacts: Path) -> None:
    view = chart(qtbot)
    name = "Harbor & Crescent Trading Company"
    view.set_data(["name", "orders"], [[name, 7]], True)
    axis = view.plot.getPlotItem().getAxis("bottom")
    qtbot.waitUntil(lambda: axis.labels == [name], timeout=5000)
    assert not axis.upright
    view.grab().save(str(artifacts / "chart_one_row.png"))
    assert "x0.001" not in axis.labelString() and axis.autoSIPrefixScale == 1.0
    [(item, _rects)] = bars(view)
    assert list(item.opts["height"]) == [7]


def test_too_many_categories_are_thinned_by_a_stated_rule(qtbot: Any) -> None:
    view = chart(qtbot)
    rows = [[f"customer {i:03d}", i] for i in range(300)]
    view.set_data(["customer", "orders"], rows, True)
    axis = view.plot.getPlotItem().getAxis("bottom")
    qtbot.waitUntil(lambda: axis.every > 1 and axis.labels == [row[0] for row in rows[:: axis.every]])
    assert axis.upright
    assert view.readout.text().startswith(f"Every {axis.every}th customer is labelled")


def test_hovering_a_scatter_point_reads_out_its_row(qtbot: Any) -> None:
    view = chart(qtbot)
    view.set_data(["price", "sold"], [[1.5, 10], [2.25, 30], [4.0, 20]], True)
    qtbot.waitExposed(view)
    box = view.plot.getPlotItem().getViewBox()
    hover_until(qtbot, view, lambda: box.mapViewToScene(QPointF(2.25, 30)), "price 2.25: sold 30")
    away = "Hover over the chart for exact values."
    hover_until(qtbot, view, lambda: box.mapViewToScene(QPointF(3.2, 12)), away)


def test_the_exported_png_is_the_chart_as_shown_scaled_fonts_and_legend_included(
    qtbot: Any, panel: SqlPanel, tmp_path: Path
) -> None:
    """A person exports the chart they see: at twice its width the PNG, scaled back down, is the
    widget's own picture (names as large relative to the plot, the legend row whole)."""
    with qtbot.waitSignal(panel.query_finished, timeout=10_000):
        panel.run(CHINOOK_COUNTRIES)
    view = panel.show_chart()
    settle(qtbot, view)
    assert view.legend is not None
    png = tmp_path / "chart.png"
    with qtbot.waitSignal(panel.export_finished, timeout=10_000):
        panel.export_chart(png, "png")
    exported = QImage(str(png)).convertToFormat(QImage.Format.Format_RGB32)
    shown = view.plot.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    shown = shown.scaled(view.plot.size())  # a high-DPI grab has more pixels than the widget
    assert exported.width() == 1600 > shown.width()
    assert abs(exported.height() / exported.width() - shown.height() / shown.width()) < 0.01
    small = exported.scaled(shown.size())
    differ = sum(
        1
        for y in range(0, shown.height(), 3)
        for x in range(0, shown.width(), 3)
        if not near(small.pixelColor(x, y), shown.pixelColor(x, y), 60)
    )
    samples = len(range(0, shown.height(), 3)) * len(range(0, shown.width(), 3))
    assert differ / samples < 0.03, differ / samples
