"""Work around a reference-count bug of PySide6 6.12.0 on Python 3.11.

PySide6 6.12.0's bindings return ``None``, ``True`` and ``False`` without taking a reference to
them, so every call such as ``widget.update()``, ``label.setText(...)``, ``widget.isVisible()``
or ``processEvents()`` takes one reference away from a singleton.  Python 3.12 made these objects
immortal, so there it is harmless; on Python 3.11 a count (a few thousand at start) reaches zero
after a few thousand calls and the interpreter aborts with "Fatal Python error: none_dealloc"
(or "bool_dealloc").  PySide6 6.11 does not have the bug (checked: the same calls leave the
counts unchanged).

The guard measures the leak with harmless calls and, only when it is there, raises the
singletons' reference counts out of reach (as an immortal object's count is in 3.12).
"""

from __future__ import annotations

import ctypes
import sys

_PINNED = 1 << 48
_SINGLETONS: tuple[object, ...] = (None, True, False, NotImplemented, Ellipsis)


def leaks_singletons() -> bool:
    """Whether void or bool PySide6 calls take references away from None / True / False."""
    from PySide6.QtCore import QObject

    probe = QObject()
    before = (sys.getrefcount(None), sys.getrefcount(False))
    for _ in range(16):
        probe.setObjectName("probe")  # returns None
        probe.signalsBlocked()  # returns False
    after = (sys.getrefcount(None), sys.getrefcount(False))
    return after[0] < before[0] - 8 or after[1] < before[1] - 8


def guard_none() -> bool:
    """Pin the singletons' reference counts when this PySide6 leaks them; True when it did."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    if not leaks_singletons():
        return False
    for singleton in _SINGLETONS:
        ctypes.c_ssize_t.from_address(id(singleton)).value += _PINNED
    return True
