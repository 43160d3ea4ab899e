"""Confidence intervals and the paired test used by reports; small enough not to need scipy.

* ``wilson``: the Wilson score interval for a proportion (good coverage near 0 % and 100 % and
  for small samples, where the normal approximation fails).
* ``mcnemar``: McNemar's test on the discordant pairs of two paired runs (``b`` = questions only
  run A got right, ``c`` = only run B).  Below 25 discordant pairs the exact two-sided binomial
  test is used, otherwise the chi-square statistic with continuity correction (1 degree of
  freedom, whose tail is ``erfc(sqrt(x / 2))``), the usual textbook split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z_95 = 1.959963984540054
EXACT_BELOW = 25


def wilson(successes: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """The 95 % Wilson interval (low, high) of ``successes / total``; (0, 1) when ``total`` is 0."""
    if total <= 0:
        return 0.0, 1.0
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class McNemar:
    b: int  # A right, B wrong
    c: int  # A wrong, B right
    p_value: float
    method: str  # "exact binomial" or "chi-square (continuity corrected)"


def mcnemar(b: int, c: int) -> McNemar:
    """McNemar's two-sided test for ``b`` and ``c`` discordant pairs (p = 1 when there are none)."""
    n = b + c
    if n == 0:
        return McNemar(b, c, 1.0, "exact binomial")
    if n < EXACT_BELOW:
        k = min(b, c)
        tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
        return McNemar(b, c, min(1.0, 2 * tail), "exact binomial")
    statistic = (abs(b - c) - 1) ** 2 / n
    return McNemar(b, c, math.erfc(math.sqrt(statistic / 2)), "chi-square (continuity corrected)")
