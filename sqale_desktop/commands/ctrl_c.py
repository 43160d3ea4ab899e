"""Ctrl+C in a command: stop the work the way the app's Stop button does, not kill the process."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def on_ctrl_c(stop: Callable[[], None]) -> Iterator[None]:
    """Call ``stop`` on Ctrl+C (SIGINT) inside the block; the previous handler is back after it.

    ``stop`` runs on the signal handler's stack, so it must only set a flag or start a thread.
    Outside the main thread (tests calling ``main()`` from a worker) Python refuses a handler:
    the block then runs with none."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop()

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
