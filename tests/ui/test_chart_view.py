"""The Chart view: the kind chosen per column mix, rendered with axis titles, switchable, exported;
the answer card's Chart button; screenshots of the data side in both palettes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QItemSelectionModel
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication

from sqale_desktop.ui.chart_view import ChartView
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
