"""Work around a reference-count bug of PySide6 6.12.0 on Python 3.11.

PySide6 6.12.0's bindings return ``None`` from void C++ methods without taking a reference to it,
so every call such as ``widget.update()``, ``label.setText(...)`` or ``processEvents()`` takes
one reference away from ``None``.  Python 3.12 made ``None`` immortal, so there it is harmless;
on Python 3.11 ``None``'s count (a few thousand at start) reaches zero after a few thousand calls
and the interpreter aborts with "Fatal Python error: none_dealloc".  PySide6 6.11 does not have
the bug (checked: the same calls leave the count unchanged).

The guard measures the leak with a harmless call and, only when it is there, raises ``None``'s
reference count out of reach (the count of an immortal object in 3.12 is similarly huge).
"""

from __future__ import annotations

import ctypes
import sys

_PINNED = 1 << 48


def leaks_none() -> bool:
    """Whether a void PySide6 call takes a reference away from None."""
    from PySide6.QtCore import QObject

    probe = QObject()
    before = sys.getrefcount(None)
    for _ in range(16):
        probe.setObjectName("probe")
    return sys.getrefcount(None) < before - 8


def guard_none() -> bool:
    """Pin None's reference count when this PySide6 leaks it; returns True when it did."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    if not leaks_none():
        return False
    ctypes.c_ssize_t.from_address(id(None)).value += _PINNED
    return True
