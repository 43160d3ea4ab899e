"""llama.cpp's own log, routed through Python logging instead of the terminal.

llama.cpp reports through one process-wide callback (``llama_log_set``, which sets ggml's too).
llama-cpp-python installs one that prints to stderr what its ``llama-cpp-python`` logger lets
through, and reads the levels with an older ggml numbering (WARN as ERROR), so with
``verbose=False`` every warning still reached the terminal: "decode: removing memory module
entries ..." after each cancelled prefill chunk, for one.

:func:`install` replaces it, once per process, with a callback that joins the pieces llama.cpp
sends (``GGML_LOG_LEVEL_CONT`` continues the previous line) into whole lines, offers each line to
the listeners (``offload.buffer_report`` reads the buffer sizes from them) and logs it on the
``llama.cpp`` logger.  Every level goes below WARNING: the engine turns each failure into an
``EngineError`` the user sees, and llama.cpp's lines are context for the log file (INFO and up,
so its warnings and errors are kept; ``--verbose`` shows everything).  The ctypes callback is
kept in a module global: llama.cpp holds only its address.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("llama.cpp")

# enum ggml_log_level (ggml/include/ggml.h): NONE, DEBUG, INFO, WARN, ERROR, CONT
_CONT = 5
_LEVELS = {0: logging.INFO, 1: logging.DEBUG, 2: logging.DEBUG, 3: logging.INFO, 4: logging.INFO}
_LABELS = {3: "warning: ", 4: "error: "}

Listener = Callable[[str], None]

_lock = threading.RLock()
_listeners: list[Listener] = []
_callback: Any = None
# The line being assembled and the level it started with (a CONT piece keeps that level).
_partial: list[str] = []
_partial_level = [2]


def install() -> None:
    """Make llama.cpp log through :data:`log` from now on (idempotent; imports ``llama_cpp``)."""
    global _callback
    with _lock:
        if _callback is not None:
            return
        import llama_cpp

        @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
        def callback(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
            receive(level, text.decode("utf-8", errors="replace"))

        _callback = callback
        llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))


def listen(listener: Listener) -> None:
    """Offer every whole line llama.cpp logs to ``listener`` until :func:`unlisten`."""
    with _lock:
        _listeners.append(listener)


def unlisten(listener: Listener) -> None:
    with _lock:
        _listeners.remove(listener)


def receive(level: int, text: str) -> None:
    """One piece from llama.cpp: lines are logged once whole (the callback's body, testable alone)."""
    with _lock:
        if level != _CONT:
            if _partial:
                _emit("".join(_partial))
                _partial.clear()
            _partial_level[0] = level
        _partial.append(text)
        joined = "".join(_partial)
        if "\n" not in joined:
            return
        *lines, rest = joined.split("\n")
        _partial[:] = [rest] if rest else []
        for line in lines:
            _emit(line)


def _emit(line: str) -> None:
    if not line.strip():
        return
    for listener in list(_listeners):
        listener(line)
    level = _partial_level[0]
    log.log(_LEVELS.get(level, logging.DEBUG), "%s%s", _LABELS.get(level, ""), line)
