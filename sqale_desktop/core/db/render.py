"""Where a SQLite value becomes text to be read: the model's tool outputs and the window's cells.

This is display, not export.  Text meant to be parsed back or pasted elsewhere (the clipboard, file
exports, ``sqale-desktop query --format csv|tsv|json|markdown``, ``ask --json``) is written by
``core/export_formats.py``, whose rules are lossless (a BLOB there is ``X'01FF'``).  What reads
this module's form: the grid's cells, the chat's result cards, the CLI's ``table`` format and the
``ask`` summary, and the model.

The model was trained on tool outputs written by Python's ``str()``: NULL read ``None`` and floats
read like ``12.037037037037036`` or ``1.0`` (Python's shortest round-trip repr).  People see
``NULL`` instead, and floats to 15 significant digits, as the sqlite3 shell prints them (its
``%!.15g``): a sum of money stored in binary reads ``523.06``, not ``523.0600000000003``, which is
a different double but not a different amount to anyone reading a table.  Copies and exports keep
the exact value (``core/export_formats.py``), and the grid's tooltip shows it.  BLOBs are never
dumped: they read ``<blob N bytes>``.  Text for the model is kept on one line (a newline would
break the row layout) and cut to ``max_chars`` with an ellipsis; text for people is cut only when
it is very long, since a grid cell cannot show a novel anyway.
"""

from __future__ import annotations

import math

DISPLAY_DIGITS = 15
"""Significant digits of a float shown to people (every double with at most 15 reads exactly)."""
MODEL_MAX_CHARS = 200
DISPLAY_MAX_CHARS = 2000
ELLIPSIS = "…"

_ONE_LINE = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": " "})


def render_cell(value: object, *, for_model: bool = False, max_chars: int | None = None) -> str:
    """Render one cell; ``max_chars`` defaults to 200 for the model and 2000 for display."""
    if value is None:
        return "None" if for_model else "NULL"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<blob {len(bytes(value))} bytes>"
    if isinstance(value, float):
        return repr(value) if for_model else display_float(value)
    text = str(value)
    if for_model:
        text = text.translate(_ONE_LINE)
    limit = max_chars if max_chars is not None else (MODEL_MAX_CHARS if for_model else DISPLAY_MAX_CHARS)
    return elide(text, limit)


def display_float(value: float) -> str:
    """``value`` to 15 significant digits, still reading as a float (``2.0``, not ``2``); the
    shortest repr when that has no more digits (so ``1.0`` and ``1e+20`` read as they always did).

    A sum that reads ``67416.5099999921`` (sakila's ``SUM(amount)``) is what SQLite before 3.43
    returned, and its own shell prints the same: it added the doubles one by one, where 3.43 and
    later sum them compensated (Kahan-Babuska-Neumaier) and return ``67416.51000000001``, the
    correctly rounded sum.  The noise is in the value, not in this rule; trimming digits here would
    misstate other values and part the grid from the copy, the export and the model's view."""
    exact = repr(value)
    if not math.isfinite(value):
        return exact
    text = f"{value:.{DISPLAY_DIGITS}g}"
    if float(text) == value:
        return exact
    return text if "." in text or "e" in text else text + ".0"


def elide(text: str, max_chars: int) -> str:
    """Cut ``text`` to at most ``max_chars`` characters, the last one an ellipsis when cut."""
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    if len(text) <= max_chars:
        return text
    return text[: max_chars - 1] + ELLIPSIS
