"""While an answer streams, Python's full collections leave alone what existed before it.

A full (oldest-generation) collection walks every object the collector tracks.  With a large
schema open (``benchmarks/ui.py --quick`` builds a 5,000-table tree first: about 250,000 objects)
one pass took 110-125 ms on the 2-core machine, and when the interpreter ran it while an answer
streamed, the chat stopped for as long: the benchmark's worst stall was 110-172 ms, against
19-25 ms with the stall measured alone (``--only-stall``).  ``gc.freeze`` moves every tracked
object to the permanent generation (a list splice, no walk), so the collections that run during
the stream walk only what the stream made; once no answer streams, ``gc.unfreeze`` hands them
back to the oldest generation, collected when the interpreter next decides to, with no stream to
stop.  Meanwhile reference counting frees what it always frees; only garbage *cycles* among the
frozen objects wait for the end of the answer.

Python 3.12's incremental collector would make this unnecessary; the app runs on 3.11.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_holders: set[object] = set()


def hold(owner: object) -> None:
    """``owner`` streams an answer: freeze the objects there are now, if nobody holds already."""
    with _lock:
        if not _holders:
            gc.freeze()
        _holders.add(owner)


def release(owner: object) -> None:
    """``owner``'s answers ended (or it is going away): unfreeze once nobody holds."""
    with _lock:
        if owner not in _holders:
            return
        _holders.discard(owner)
        if not _holders:
            gc.unfreeze()


def holding() -> bool:
    """Whether an answer streams somewhere, so that what existed before it is frozen."""
    with _lock:
        return bool(_holders)
