"""Which history entry an answer card shows.

A follow-up records the entry it continues (``History.add_question(parent_entry_id=…)``) and asks
the history for that entry's stored thread, so a card must be known by its entry whether it was
shown live (``EpisodeController``) or restored from the history after a restart
(``Conversations``).  The two meet here.  The map holds its cards weakly: an entry is forgotten
with its card (a cleared conversation, a closed tab), and nothing has to be removed by hand.
Used on the UI thread only.
"""

from __future__ import annotations

import weakref

_ENTRIES: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()


def remember_entry(card: object, entry_id: int) -> None:
    """Note that ``card`` shows the history entry ``entry_id``."""
    _ENTRIES[card] = entry_id


def entry_of(card: object) -> int | None:
    """The history entry ``card`` shows (None: it was never stored, e.g. the history is unavailable)."""
    return _ENTRIES.get(card)
