"""How llama.cpp's OpenMP threads wait, set before the library (and its libgomp) loads.

The shipped llama-cpp-python build uses OpenMP; at every barrier of a decode its threads spin
for the others.  libgomp's default spin (300,000 rounds, then sleep) is what an idle machine
wants, but when another process takes a core away the spinning thread burns the time slice the
descheduled one needs and decoding collapses (0.24 tok/s instead of 8.6 measured on 2 cores
with one busy background process).  libgomp reads its wait settings once, when it is loaded,
so they are set here, in-process, before ``import llama_cpp``; a user who set any OpenMP wait
variable keeps their own.

The choice is a short bounded spin, not passive waits: ``benchmarks/engine.py --policy-sweep``
on a quiet 2-core machine (2B-shaped Q4_K_M, decode tok/s, repeated runs of the idle column):

| policy, 2 threads        | idle       | +1 busy | +2 busy |
|--------------------------|------------|---------|---------|
| OpenMP default           | 17.6-20.2  | 6.5     | 6.1     |
| GOMP_SPINCOUNT=3000      | 18.9-20.9  | 6.3     | 6.4     |
| GOMP_SPINCOUNT=10000     | 14.7-19.1  | 4.1     | 8.4     |
| GOMP_SPINCOUNT=30000     | 15.2-19.7  | 2.6     | 7.7     |
| OMP_WAIT_POLICY=PASSIVE  | 13.7-15.2  | 11.6    | 6.8     |
| GOMP_SPINCOUNT=0         | 13.4       | 13.1    | 8.9     |
| 1 thread, any policy     | 13.1-14.7  | 9.7-14.1| 8.3-12.7|

Passive waits hold up under load but cost a quarter of the idle speed (waking a sleeping thread
at each of several hundred barriers per token); a spin of 3,000 rounds is as fast as the
default when idle and, unlike the default, stops burning a core a few microseconds after the
work ends.  What keeps it from collapsing under load is the engine's ``thread_governor``: it
drops to one thread fewer when steps slow down, and one thread with any policy runs at full
speed on the core that is left.  A fixed thread count set by the user gets no governor; with 2
threads on a busy machine it then decodes at the "+1 busy" figures above.
"""

from __future__ import annotations

import os
import sys

# Spin briefly at a barrier, then sleep (libgomp; LLVM's libomp has its own KMP_BLOCKTIME, left alone).
WAIT_POLICY: dict[str, str] = {"GOMP_SPINCOUNT": "3000"}
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
