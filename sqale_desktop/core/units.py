"""Byte sizes as people read them, written the same way in the window, the CLI and messages."""

from __future__ import annotations

from typing import Literal

MIB = 2**20
GIB = 2**30


def format_bytes(n: int | float | None, unit: Literal["auto", "MiB", "GiB"] = "auto") -> str:
    """``1.17 GiB`` or ``12.3 MiB`` (binary units, as file managers and llama.cpp print them).

    ``auto`` picks GiB from one GiB up and MiB below; None (a size not known yet) reads ``?``.
    """
    if n is None:
        return "?"
    if unit == "GiB" or (unit == "auto" and abs(n) >= GIB):
        return f"{n / GIB:.2f} GiB"
    return f"{n / MIB:.1f} MiB"
