"""Which chart a result gets, from the kinds of its columns' values."""

from __future__ import annotations

import math

from sqale_desktop.core.chart_plan import choose_chart, column_kinds, has_numeric_column, x_values, y_values


def test_column_kinds_come_from_the_values() -> None:
    rows = [
        ["Rock", 12, 1.5, "2024-01-02", None, True],
        ["Jazz", None, 2, "2024-01-03 10:00:00", None, False],
    ]
    kinds = column_kinds(["genre", "n", "x", "day", "nothing", "flag"], rows)
    assert kinds == ["text", "number", "number", "date", "empty", "text"]  # booleans are no numbers


def test_text_with_numbers_is_a_bar_chart() -> None:
    plan = choose_chart(["genre", "tracks", "minutes"], [["Rock", 10, 2.5], ["Jazz", 3, 1.0]])
    assert plan is not None
    assert (plan.kind, plan.x, plan.ys, plan.x_label, plan.y_labels) == (
        "bar",
        0,
        [1, 2],
        "genre",
        ["tracks", "minutes"],
    )


def test_dates_with_numbers_are_a_line_chart() -> None:
    plan = choose_chart(["n", "day"], [[5, "2024-01-01"], [7, "2024-01-02T00:00:00Z"]])
    assert plan is not None and (plan.kind, plan.x, plan.x_kind, plan.ys) == ("line", 1, "date", [0])
    xs, categories = x_values(plan, [[5, "2024-01-01"], [7, "2024-01-02T00:00:00Z"]])
    assert xs[1] - xs[0] == 86_400 and categories == []


def test_two_numbers_are_a_scatter_and_one_is_a_line_by_row() -> None:
    plan = choose_chart(["price", "sold"], [[1.5, 3], [2.0, 5]])
    assert plan is not None and (plan.kind, plan.x, plan.ys) == ("scatter", 0, [1])
    single = choose_chart(["total"], [[3], [4]])
    assert single is not None and (single.kind, single.x, single.x_label) == ("line", None, "row")


def test_no_numeric_column_no_chart_and_the_kind_can_be_switched() -> None:
    assert choose_chart(["name"], [["a"], ["b"]]) is None
    assert not has_numeric_column(["name"], [["a"]])
    assert has_numeric_column(["name", "n"], [["a", None], ["b", 2]])
    plan = choose_chart(["genre", "n"], [["Rock", 1]], kind="scatter")
    assert plan is not None and plan.kind == "scatter" and plan.x == 0


def test_categories_in_first_appearance_order_and_nulls_as_gaps() -> None:
    rows = [["b", 1], ["a", None], ["b", 3], [None, 4]]
    plan = choose_chart(["k", "v"], rows)
    assert plan is not None
    xs, categories = x_values(plan, rows)
    assert categories == ["b", "a", "NULL"] and xs == [0.0, 1.0, 0.0, 2.0]
    ys = y_values(1, rows)
    assert ys[0] == 1.0 and math.isnan(ys[1])
