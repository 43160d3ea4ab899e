"""Every rule of the three metrics (see the docstring of sqale_desktop.core.eval.metrics)."""

from __future__ import annotations

import pytest

from sqale_desktop.core.eval import metrics as m

# -- sqale ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "ordered"),
    [
        ("SELECT a FROM t ORDER BY a", True),
        ("select a from t order by a desc limit 3", True),
        ("SELECT a FROM t", False),
        ("SELECT a FROM (SELECT a FROM t ORDER BY a) AS s", False),  # only the inner query is ordered
        ("SELECT a FROM t WHERE b = 'order by'", False),  # a literal, not a clause
        ("SELECT a, row_number() OVER (ORDER BY a) FROM t", False),  # a window, not the result
        ("WITH c AS (SELECT a FROM t ORDER BY a) SELECT a FROM c", False),
        ("WITH c AS (SELECT a FROM t) SELECT a FROM c ORDER BY a", True),
        ("SELECT a FROM t UNION SELECT a FROM u ORDER BY a", True),
        ("SELECT a FROM t WHERE a IN (SELECT a FROM u ORDER BY a LIMIT 1)", False),
        ("(SELECT a FROM t ORDER BY a)", True),
        ("this is not sql at all (((", False),
    ],
)
def test_sqale_order_is_decided_by_the_outermost_select(sql: str, ordered: bool) -> None:
    assert m.outermost_order_by(sql) is ordered


def test_sqale_unordered_compares_multisets() -> None:
    gold = [(1, "a"), (2, "b"), (2, "b")]
    assert m.results_match("sqale", "SELECT x, y FROM t", gold, [(2, "b"), (1, "a"), (2, "b")])
    # duplicates count
    assert not m.results_match("sqale", "SELECT x, y FROM t", gold, [(2, "b"), (1, "a"), (1, "a")])
    assert not m.results_match("sqale", "SELECT x, y FROM t", gold, [(1, "a"), (2, "b")])


def test_sqale_ordered_compares_lists() -> None:
    gold = [(1,), (2,)]
    assert m.results_match("sqale", "SELECT x FROM t ORDER BY x", gold, [(1,), (2,)])
    assert not m.results_match("sqale", "SELECT x FROM t ORDER BY x", gold, [(2,), (1,)])
    assert m.results_match("sqale", "SELECT x FROM t", gold, [(2,), (1,)])


def test_sqale_values_compare_as_sqlite_returns_them() -> None:
    assert m.results_match("sqale", "SELECT 1", [(1,)], [(1.0,)])  # 1 = 1.0
    assert m.results_match("sqale", "SELECT NULL", [(None,)], [(None,)])
    assert not m.results_match("sqale", "SELECT 1", [(1,)], [("1",)])  # text is not a number
    assert not m.results_match("sqale", "SELECT NULL", [(None,)], [(0,)])


def test_sqale_column_order_matters_and_names_do_not() -> None:
    assert not m.results_match("sqale", "SELECT a, b FROM t", [(1, "x")], [("x", 1)])
    assert m.results_match("sqale", "SELECT a, b FROM t", [], [])


# -- spider -----------------------------------------------------------------------------------


def test_spider_order_matters_iff_the_text_order_by_appears() -> None:
    assert m.spider_order_matters("SELECT a FROM t ORDER BY a")
    # a substring rule, unlike sqale: an inner ORDER BY or a literal counts too
    assert m.spider_order_matters("SELECT a FROM (SELECT a FROM t ORDER BY a)")
    assert m.spider_order_matters("SELECT a FROM t WHERE b = 'x order by y'")
    assert not m.spider_order_matters("SELECT a FROM t ORDER  BY a")  # two spaces: not the text
    gold = [(1,), (2,)]
    assert not m.results_match("spider", "SELECT a FROM t ORDER BY a", gold, [(2,), (1,)])
    assert m.results_match("spider", "SELECT a FROM t", gold, [(2,), (1,)])


def test_spider_unordered_rows_are_multisets() -> None:
    gold = [(1,), (1,), (2,)]
    assert m.results_match("spider", "SELECT a FROM t", gold, [(2,), (1,), (1,)])
    assert not m.results_match("spider", "SELECT a FROM t", gold, [(2,), (2,), (1,)])


def test_spider_column_order_is_free_and_counts_must_agree() -> None:
    gold = [(1, "a"), (2, "b")]
    assert m.results_match("spider", "SELECT x, y FROM t", gold, [("a", 1), ("b", 2)])
    assert m.results_match("spider", "SELECT x, y FROM t ORDER BY x", gold, [("a", 1), ("b", 2)])
    assert not m.results_match("spider", "SELECT x, y FROM t", gold, [("a",), ("b",)])
    assert not m.results_match("spider", "SELECT x, y FROM t", gold, [(1, "a", 0), (2, "b", 0)])
    # a permutation must be one for all rows
    assert not m.results_match("spider", "SELECT x, y FROM t", [(1, 2), (3, 4)], [(2, 1), (3, 4)])


def test_spider_permutations_with_many_columns() -> None:
    gold = [(1, 2, 3, 4, 5), (6, 7, 8, 9, 10)]
    pred = [(5, 4, 3, 2, 1), (10, 9, 8, 7, 6)]
    assert m.results_match("spider", "SELECT a, b, c, d, e FROM t", gold, pred)
    assert not m.results_match(
        "spider", "SELECT a, b, c, d, e FROM t", gold, [(5, 4, 3, 2, 1), (10, 9, 8, 6, 7)]
    )


def test_spider_two_empty_results_are_equal_whatever_their_columns() -> None:
    assert m.spider_match([], [], order_matters=False)
    assert m.results_match("spider", "SELECT a, b FROM t", [], [])
    assert not m.results_match("spider", "SELECT a FROM t", [], [(1,)])
    assert not m.results_match("spider", "SELECT a FROM t", [(1,)], [])


def test_spider_removes_every_distinct_before_running() -> None:
    assert m.spider_prepare("SELECT DISTINCT a FROM t") == "SELECT  a FROM t"
    assert m.spider_prepare("SELECT count(DISTINCT a) FROM t") == "SELECT count( a) FROM t"
    assert m.spider_prepare("select distinct a, count(distinct b) from t") == "select  a, count( b) from t"
    # only the keyword: a column or a literal holding the word stays
    assert m.spider_prepare("SELECT distinct_name FROM t WHERE x = 'distinct'") == (
        "SELECT distinct_name FROM t WHERE x = 'distinct'"
    )
    assert m.prepare_sql("sqale", "SELECT DISTINCT a FROM t") == "SELECT DISTINCT a FROM t"


def test_spider_postprocesses_spaced_comparison_operators() -> None:
    assert m.spider_prepare("SELECT a FROM t WHERE a > = 1 AND b < = 2 AND c ! = 3") == (
        "SELECT a FROM t WHERE a >= 1 AND b <= 2 AND c != 3"
    )


def test_spider_values_by_plain_equality() -> None:
    assert m.results_match("spider", "SELECT a FROM t", [(1,)], [(1.0,)])
    assert m.results_match("spider", "SELECT a FROM t", [(None,)], [(None,)])
    assert not m.results_match("spider", "SELECT a FROM t", [(1,)], [("1",)])


def test_spider_quick_rejection_sorts_row_values_by_their_text_and_type() -> None:
    # The official quick rejection sorts each row's values by str(value) + str(type(value)):
    # "1<class 'int'>" sorts after "1.5<class 'str'>" but "1.0<class 'float'>" before it, so
    # (1, '1.5') and (1.0, '1.5') are rejected although 1 == 1.0; reproducing the rule keeps the
    # figures comparable with published ones.  The sqale metric accepts the pair.
    assert m._unorder_row((1, "1.5")) == ("1.5", 1)
    assert m._unorder_row((1.0, "1.5")) == (1.0, "1.5")
    assert not m.results_match("spider", "SELECT a, b FROM t", [(1, "1.5")], [(1.0, "1.5")])
    assert m.results_match("sqale", "SELECT a, b FROM t", [(1, "1.5")], [(1.0, "1.5")])
    assert m.results_match("spider", "SELECT a, b FROM t", [(1, "a")], [("a", 1)])


# -- bird -------------------------------------------------------------------------------------


def test_bird_compares_sets_of_rows() -> None:
    gold = [(1, "a"), (2, "b")]
    assert m.results_match("bird", "SELECT x, y FROM t ORDER BY x", gold, [(2, "b"), (1, "a"), (1, "a")])
    assert not m.results_match("bird", "SELECT x, y FROM t", gold, [("a", 1), ("b", 2)])  # column order
    assert m.results_match("bird", "SELECT x FROM t", [(1,)], [(1.0,)])
    assert m.results_match("bird", "SELECT x FROM t", [], [])
    assert not m.results_match("bird", "SELECT x FROM t", [(None,)], [])


# -- F1 ---------------------------------------------------------------------------------------


def test_multiset_f1() -> None:
    assert m.multiset_f1([(1,), (2,)], [(1,), (2,)]) == 1.0
    assert m.multiset_f1([(1,), (2,)], [(3,)]) == 0.0
    assert m.multiset_f1([(1,), (2,)], [(1,)]) == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    # multiplicity: two copies of (1,) against one
    assert m.multiset_f1([(1,)], [(1,), (1,)]) == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert m.multiset_f1([], []) == 1.0
    assert m.multiset_f1([(1,)], []) == 0.0


def test_unknown_metric_is_refused() -> None:
    with pytest.raises(ValueError):
        m.results_match("nope", "SELECT 1", [], [])  # type: ignore[arg-type]
