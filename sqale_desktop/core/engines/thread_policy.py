"""How llama.cpp's OpenMP threads wait, set before the library (and its libgomp) loads.

The shipped llama-cpp-python build uses OpenMP; at every barrier of a decode its threads spin
for the others.  When another process takes a core away (a browser, an IDE), the spinning
thread burns the time slice the descheduled one needs and decoding collapses (measured on
2 cores with one busy background process: 0.24 tok/s instead of 8.6).  libgomp reads its
wait policy once, when it is loaded, so it is set here, in-process, before ``import llama_cpp``;
a user who set any OpenMP wait variable keeps their own.

Measured with ``benchmarks/engine.py --policy-sweep`` (2B-shaped Q4_K_M, 2 cores that five
other jobs were using at the same time, so even "no extra load" was loaded; decode tok/s from
the median time inside ``llama_decode``):

| policy, threads        | +0 busy | +1 busy | +2 busy |
|------------------------|---------|---------|---------|
| OpenMP default, 2      | 0.18    | 0.16    | 0.07    |
| GOMP_SPINCOUNT=10000, 2| 2.2     | 2.1     | -       |
| GOMP_SPINCOUNT=100000,2| 0.57    | 0.24    | -       |
| PASSIVE, 2             | 4.95    | 9.65    | 5.82    |
| GOMP_SPINCOUNT=0, 2    | 8.87    | 7.74    | 5.11    |
| any policy, 1          | 3.7-5.1 | 1.3-6.8 | 1.4-2.8 |

Every spinning policy with 2 threads collapsed; passive waiting (libgomp: spin count 0) with
one thread per core was the best or near it in every column.  A truly idle machine was not
available, but passive waiting reached 8.9-9.7 tok/s here, at or above the best idle figure
recorded for spinning threads on this kind of machine (8.56, ENGINE-NOTES); the earlier
"passive: 4.27 idle" reading is not reproduced by these runs.  ``benchmarks/engine.py``
reports the idle ratio against the best setting on every run, so a machine where passive
waiting costs more shows it.
"""

from __future__ import annotations

import os
import sys

# Sleep at a barrier instead of spinning (libgomp: spin count 0; LLVM's libomp honours it too).
WAIT_POLICY: dict[str, str] = {"OMP_WAIT_POLICY": "PASSIVE"}
# Any of these set by the user means they chose a policy: leave all of them alone.
USER_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def apply() -> str | None:
    """Set the wait policy defaults; returns a note when llama.cpp was loaded too early for them."""
    if not any(name in os.environ for name in USER_VARIABLES):
        os.environ.update(WAIT_POLICY)
    if "llama_cpp" in sys.modules:
        return "llama.cpp was loaded before the engine set its thread wait policy; the OpenMP defaults apply"
    return None


def effective() -> dict[str, str]:
    """The wait-policy variables as the process has them now (for benchmarks and notes)."""
    return {name: os.environ[name] for name in USER_VARIABLES if name in os.environ}
