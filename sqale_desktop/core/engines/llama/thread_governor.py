"""How many threads the next decode step uses, chosen from the step times the engine measures.

Why at run time: on an idle CPU one thread per core with short spinning waits decodes fastest
(the OpenMP threads meet at a barrier several hundred times per token, and waking a sleeping
thread costs more than a short spin).  When another program takes a core, the thread that lost
its core holds every barrier up and the step takes several times longer, while one thread fewer
would run at full speed on the cores that are left.  No fixed setting is best in both cases
(``benchmarks/engine.py --policy-sweep``, 2B-shaped Q4_K_M on 2 cores, decode tok/s):

| setting                    | idle     | one busy process |
|----------------------------|----------|------------------|
| 2 threads, spin 3000       | 18.9-20.9| 6.3              |
| 2 threads, passive waits   | 13.7-15.2| 11.6             |
| 1 thread, any policy       | 13.1-14.7| 9.7-14.1         |

So the engine keeps short spinning waits (``thread_policy``) and lets this governor move the
decode thread count: it stays where it is while steps keep their speed, tries one thread fewer
as soon as steps get much slower than the speed it settled on (another program arrived), and
now and then tries a neighbouring count (one more when below the maximum, so it climbs back
when the other program is gone).  A trial is a handful of steps; the faster median wins.
Trials that lose make the next periodic trial wait twice as long, so an idle machine pays
well under one percent for the watching.

Prefill is left at every core: a batch of 128 tokens has few barriers per unit of work, and the
sweep found it degrades gracefully under load.

Only plain timings go in (seconds per step); it knows nothing of llama.cpp, so it is tested
with made-up machines.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

# Steps per measurement window; the first step after a change of count is dropped (thread wake-up).
WINDOW = 5
# A window this much slower than the settled speed means the machine changed: try fewer threads.
CONTENTION = 1.5
# A trial must be this much faster than the count it challenges to win (noise is ~10 %).
MARGIN = 0.92
# The first periodic trial comes early (a machine already busy when the model loaded gives no
# slowdown to notice); after that, trials come every EXPLORE_EVERY steps, doubled after each lost
# one up to a cap: long for trying fewer threads (a new load is noticed by its slowdown anyway),
# shorter for trying more (how soon decoding climbs back once the other program is gone).
EXPLORE_FIRST = 2 * WINDOW
EXPLORE_EVERY = 256
EXPLORE_MAX_FEWER = 2048
EXPLORE_MAX_MORE = 512


@dataclass
class ThreadGovernor:
    """Picks the thread count of each single-token decode step between 1 and ``most``."""

    most: int
    current: int = 0
    # The median step time the current count settled on (0: not measured yet).
    settled: float = 0.0
    switches: int = 0
    trials: int = 0
    _trial: int | None = None
    _times: list[float] = field(default_factory=list)
    _recent: float = 0.0
    _skip: int = 1
    _since_trial: int = 0
    _explore_every: int = EXPLORE_FIRST

    def __post_init__(self) -> None:
        self.most = max(1, self.most)
        self.current = self.current or self.most

    def threads(self) -> int:
        """The count the next step should run with."""
        return self._trial if self._trial is not None else self.current

    def record(self, threads: int, seconds: float) -> None:
        """Take the time of one step that ran with ``threads`` threads."""
        if threads != self.threads():
            return  # a step decided before the last change; its time says nothing of the new count
        if self._skip:
            self._skip -= 1
            return
        self._times.append(seconds)
        self._since_trial += 1
        if len(self._times) < WINDOW:
            return
        median = statistics.median(self._times)
        self._times.clear()
        if self._trial is not None:
            self._end_trial(median)
        else:
            self._judge(median)

    def _judge(self, median: float) -> None:
        """A full window at the current count: settle, or start a trial."""
        self._recent = median
        if not self.settled or median < self.settled:
            self.settled = median
        if self.most == 1:
            return
        if median > CONTENTION * self.settled and self.current > 1:
            self._start_trial(self.current - 1)
        elif self._since_trial >= self._explore_every:
            self._start_trial(self.current + 1 if self.current < self.most else self.current - 1)

    def _start_trial(self, threads: int) -> None:
        self._trial = threads
        self.trials += 1
        self._since_trial = 0
        self._skip = 1

    def _end_trial(self, median: float) -> None:
        """The trial's window is done: the faster count stays."""
        assert self._trial is not None
        if median < MARGIN * self._recent:
            self.current = self._trial
            self.settled = median
            self.switches += 1
            self._explore_every = EXPLORE_EVERY
        else:
            # The count it challenged stays; its fresh window is the speed to hold it to.
            self.settled = self._recent
            cap = EXPLORE_MAX_FEWER if self._trial < self.current else EXPLORE_MAX_MORE
            self._explore_every = min(cap, max(EXPLORE_EVERY, 2 * self._explore_every))
        self._trial = None
        self._skip = 1
