"""Table and column names: changed only where SQLite needs it, the original always kept.

SQLite takes any name that is quoted, so a header such as ``Beak Length (mm)`` stays as it is:
the models saw such names in their training schemas and quote them.  What SQLite cannot hold is an
empty name, two columns whose names differ only in case, a NUL, or a table named ``sqlite_…``;
line breaks inside a header cell (a quoted CSV header with an LF in it) are folded to spaces so the
name can be written on one line of SQL.  Every change is recorded so the ``_columns`` note and the
CREATE statement's comments can show the original.
"""

from __future__ import annotations

import re

_SPACES = re.compile(r"\s+")
RESERVED_TABLES = frozenset({"_columns"})


def clean(name: str) -> str:
    """``name`` with NULs removed and runs of white space (line breaks included) made one space."""
    return _SPACES.sub(" ", name.replace("\x00", "")).strip()


def unique_columns(headers: list[str]) -> list[str]:
    """Column names for ``headers``: empty ones become ``column_N`` (N its 1-based position) and
    repeats get ``_2``, ``_3``… (compared without case, as SQLite compares them)."""
    taken: set[str] = set()
    out: list[str] = []
    for position, raw in enumerate(headers, start=1):
        out.append(_claim(clean(raw) or f"column_{position}", taken))
    return out


def unique_table(raw: str, taken: set[str]) -> str:
    """A table name for ``raw`` (a file stem, a sheet name) not yet in ``taken`` (casefolded), which
    it is added to.  ``sqlite_`` is SQLite's own prefix and ``_columns`` is the import's note."""
    base = clean(raw) or "table"
    if base.casefold().startswith("sqlite_") or base.casefold() in RESERVED_TABLES:
        base = f"t_{base}"
    return _claim(base, taken)


def _claim(base: str, taken: set[str]) -> str:
    """The first of ``base``, ``base_2``, ``base_3``… not in ``taken`` (casefolded, as SQLite
    compares names), added to it: columns and tables number their repeats alike."""
    name = base
    n = 2
    while name.casefold() in taken:
        name = f"{base}_{n}"
        n += 1
    taken.add(name.casefold())
    return name


def quote(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def comment(text: str) -> str:
    """``text`` safe inside a ``--`` comment of a CREATE statement (one line)."""
    return text.replace("\x00", "").replace("\r", " ").replace("\n", " ")
