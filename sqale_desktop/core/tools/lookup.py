"""Finding the table or column the model meant, with SQLite's case rules and close suggestions."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from sqale_desktop.core.db.identifiers import fold

MAX_SUGGESTIONS = 3


def find_name(name: str, candidates: Sequence[str]) -> str | None:
    """The candidate equal to ``name``: exact first, then ASCII case-insensitive like SQLite."""
    for attempt in (name, unquote(name)):
        if attempt in candidates:
            return attempt
        key = fold(attempt)
        for candidate in candidates:
            if fold(candidate) == key:
                return candidate
    return None


def unquote(name: str) -> str:
    """``"a b"``, ``[a b]`` or `` `a b` `` as the model may write them, without the quotes."""
    text = name.strip()
    if len(text) >= 2 and (text[0], text[-1]) in {('"', '"'), ("[", "]"), ("`", "`"), ("'", "'")}:
        inner = text[1:-1]
        return inner.replace('""', '"') if text[0] == '"' else inner
    return text


def suggest(name: str, candidates: Sequence[str]) -> list[str]:
    """Up to three close names: similar spelling first, then names containing it."""
    by_key: dict[str, str] = {}
    for candidate in candidates:
        by_key.setdefault(fold(candidate), candidate)
    key = fold(unquote(name))
    close = difflib.get_close_matches(key, list(by_key), n=MAX_SUGGESTIONS, cutoff=0.6)
    if len(close) < MAX_SUGGESTIONS and key:
        close += [k for k in by_key if (key in k or k in key) and k not in close and len(k) > 2]
    return [by_key[k] for k in close[:MAX_SUGGESTIONS]]
