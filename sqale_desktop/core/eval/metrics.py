"""The three execution-match metrics, each rule in one place: ``sqale``, ``spider`` and ``bird``.

Every metric compares the rows a gold query returned with the rows a predicted query returned;
running the queries (read-only, with a time limit) is :mod:`sqale_desktop.core.eval.scorer`'s job.

``sqale`` (the default; the SQaLe paper's "result sets match"):
  * rows compare as multisets: duplicates count, row order does not ...
  * ... unless the gold query's *outermost* SELECT (or compound SELECT) has an ORDER BY, decided by
    parsing the gold SQL with sqlglot (an ORDER BY inside a subquery, a CTE or a window does not
    count; a string literal containing "order by" does not either);
  * a row is the tuple of its values in column order; column names are ignored;
  * values compare as SQLite returns them, with Python equality (``1 == 1.0``, NULL equals NULL).

``spider``: the official Spider execution match (test-suite-sql-eval, ``exec_eval.py``), rule for
rule, so figures are comparable with published Spider results:
  * both queries are post-processed (``> =`` -> ``>=``, ``< =`` -> ``<=``, ``! =`` -> ``!=``) and
    every DISTINCT keyword is removed before they run, inside aggregates too (the official default,
    ``keep_distinct=False``; removal works on sqlparse's tokens, as the official script does);
  * row order matters iff the lower-cased gold SQL contains the text ``order by``;
  * two empty results are equal whatever their columns; otherwise row counts and column counts
    must agree;
  * a quick rejection compares each row's values sorted by ``str(value) + str(type(value))``
    (as lists when order matters, as sets otherwise);
  * column order is free: the prediction matches if some permutation of its columns makes its
    rows equal to the gold rows (as lists when order matters, else as sets and as multisets);
  * values compare by plain equality; text is decoded ignoring undecodable bytes (the scorer
    opens Spider databases so).
  The official script narrows the column permutations with 20 randomly chosen rows; this module
  narrows them with every row, which gives the same verdict (a permutation that matches survives
  any row's constraint) without the randomness.

``bird``: BIRD's ``set(predicted) == set(gold)`` over the result rows (duplicates and order
ignored; column order matters).

The F1 of a wrong answer is the multiset F1 of its rows against the gold rows, as in the reward
the SQaLe models were trained with (precision and recall over rows counted with multiplicity).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from itertools import product
from typing import Any, Literal

Metric = Literal["sqale", "spider", "bird"]
METRICS: tuple[Metric, ...] = ("sqale", "spider", "bird")
Row = tuple[Any, ...]


# -- sqale ------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def outermost_order_by(sql: str) -> bool:
    """Whether the outermost SELECT (or compound SELECT) of ``sql`` has an ORDER BY clause.

    Parsed with sqlglot's SQLite dialect; a statement sqlglot cannot parse counts as unordered
    (the multiset comparison is the lenient one, so such a gold query never fails a prediction for
    its row order alone).
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except SqlglotError:
        return False
    while isinstance(tree, exp.Subquery | exp.Paren):
        if tree.args.get("order") is not None:
            return True
        tree = tree.this
    return isinstance(tree, exp.Query) and tree.args.get("order") is not None


def sqale_match(gold: Sequence[Row], pred: Sequence[Row], ordered: bool) -> bool:
    """The ``sqale`` rule: equal lists of rows when ``ordered``, else equal multisets of rows."""
    if ordered:
        return list(gold) == list(pred)
    return len(gold) == len(pred) and Counter(gold) == Counter(pred)


# -- spider -----------------------------------------------------------------------------------


def spider_postprocess(sql: str) -> str:
    """The official script's clean-up of a query before it runs."""
    return sql.replace("> =", ">=").replace("< =", "<=").replace("! =", "!=")


def remove_distinct(sql: str) -> str:
    """``sql`` with every DISTINCT keyword removed (the official ``remove_distinct``)."""
    import sqlparse

    statements = sqlparse.parse(sql)
    if not statements:
        return sql
    tokens = [token.value for token in statements[0].flatten()]  # type: ignore[no-untyped-call]
    return "".join(token for token in tokens if token.lower() != "distinct")


@functools.lru_cache(maxsize=8192)
def spider_prepare(sql: str) -> str:
    """A query as the official Spider execution match runs it."""
    return remove_distinct(spider_postprocess(sql))


def spider_order_matters(gold_sql: str) -> bool:
    """The official rule: row order matters iff the gold SQL contains ``order by``."""
    return "order by" in spider_prepare(gold_sql).lower()


def _unorder_row(row: Row) -> Row:
    return tuple(sorted(row, key=lambda value: str(value) + str(type(value))))


def _quick_reject_passes(gold: Sequence[Row], pred: Sequence[Row], order_matters: bool) -> bool:
    first = [_unorder_row(row) for row in gold]
    second = [_unorder_row(row) for row in pred]
    if order_matters:
        return first == second
    return set(first) == set(second)


def _multiset_eq(first: Sequence[Row], second: Sequence[Row]) -> bool:
    return len(first) == len(second) and Counter(first) == Counter(second)


def _candidate_permutations(gold: Sequence[Row], pred: Sequence[Row]) -> Iterator[tuple[int, ...]]:
    """Column permutations of the prediction that every row allows (see the module docstring)."""
    columns = len(gold[0])
    gold_values = [{row[i] for row in gold} for i in range(columns)]
    allowed: list[set[int]] = [set(range(columns)) for _ in range(columns)]
    if columns > 3:
        for row in pred:
            for gold_col in range(columns):
                allowed[gold_col] = {c for c in allowed[gold_col] if row[c] in gold_values[gold_col]}
    for perm in product(*(sorted(a) for a in allowed)):
        if len(set(perm)) == len(perm):
            yield perm


def spider_match(gold: Sequence[Row], pred: Sequence[Row], order_matters: bool) -> bool:
    """The official ``result_eq(gold, pred, order_matters)``."""
    if not gold and not pred:
        return True
    if len(gold) != len(pred):
        return False
    columns = len(gold[0])
    if len(pred[0]) != columns:
        return False
    if not _quick_reject_passes(gold, pred, order_matters):
        return False
    for perm in _candidate_permutations(gold, pred):
        permuted = list(pred) if columns == 1 else [tuple(row[i] for i in perm) for row in pred]
        if order_matters:
            if list(gold) == permuted:
                return True
        elif set(gold) == set(permuted) and _multiset_eq(gold, permuted):
            return True
    return False


# -- bird -------------------------------------------------------------------------------------


def bird_match(gold: Iterable[Row], pred: Iterable[Row]) -> bool:
    """BIRD's rule: the sets of result rows are equal."""
    return set(gold) == set(pred)


# -- shared -----------------------------------------------------------------------------------


def multiset_f1(gold: Sequence[Row], pred: Sequence[Row]) -> float:
    """Multiset F1 of the predicted rows against the gold rows (1.0 when both are empty)."""
    if not gold and not pred:
        return 1.0
    if not gold or not pred:
        return 0.0
    overlap = sum((Counter(gold) & Counter(pred)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred)
    recall = overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


def prepare_sql(metric: Metric, sql: str) -> str:
    """The text that is actually run for ``metric`` (only ``spider`` rewrites queries)."""
    return spider_prepare(sql) if metric == "spider" else sql


def results_match(metric: Metric, gold_sql: str, gold: Sequence[Row], pred: Sequence[Row]) -> bool:
    """Whether ``pred`` matches ``gold`` under ``metric``; ``gold_sql`` decides whether order matters."""
    if metric == "sqale":
        return sqale_match(gold, pred, outermost_order_by(gold_sql))
    if metric == "spider":
        return spider_match(gold, pred, spider_order_matters(gold_sql))
    if metric == "bird":
        return bird_match(gold, pred)
    raise ValueError(f"unknown metric {metric!r}")
