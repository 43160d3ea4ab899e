"""Quoting SQLite identifiers, and SQLite's own notion of equal names.

Names like ``Table With Space In Name``, ``table/with/slashes.csv``, ``[select]``,
``123_starts_with_digits`` or ``a"b`` are all legal; double-quoting with doubled inner quotes is
the one form that works for every one of them.
"""

from __future__ import annotations

import re

_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Words that need quoting even though they look like plain identifiers (the common SQL keywords;
# quoting a few extra names is harmless, missing one is not).
_KEYWORDS = frozenset(
    """abort action add after all alter always analyze and as asc attach autoincrement before begin
    between by cascade case cast check collate column commit conflict constraint create cross current
    current_date current_time current_timestamp database default deferrable deferred delete desc
    detach distinct do drop each else end escape except exclude exclusive exists explain fail filter
    first following for foreign from full generated glob group groups having if ignore immediate in
    index indexed initially inner insert instead intersect into is isnull join key last left like
    limit match materialized natural no not nothing notnull null nulls of offset on or order others
    outer over partition plan pragma preceding primary query raise range recursive references regexp
    reindex release rename replace restrict returning right rollback row rows savepoint select set
    table temp temporary then ties to transaction trigger unbounded union unique update using vacuum
    values view virtual when where window with without""".split()  # noqa: SIM905 (a word list reads better)
)


def quote_identifier(name: str) -> str:
    """Always-correct quoting: ``"name"`` with inner double quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def display_identifier(name: str) -> str:
    """The name as a person would type it in SQL: bare when that is safe, quoted otherwise."""
    if _BARE.match(name) and name.lower() not in _KEYWORDS:
        return name
    return quote_identifier(name)


def fold(name: str) -> str:
    """SQLite compares identifiers case-insensitively for ASCII letters only."""
    return name.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
