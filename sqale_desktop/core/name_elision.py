"""Shortening names to a width so that the ones in sight still read apart (the schema tree's rows).

Plain Python: the caller passes the names, the room and a measure of a text's width (a font's
advance in the window, ``len`` for a budget of characters), so the rules are tested without a
window (issue 31).

Why not the usual middle elision: a schema's names share their starts and sort side by side, so a
cut in the middle hides where they differ.  Six tables of the iOS power log all read
``PLAccountin…nts_Dynamic``, and the columns of a real ISTAT file (``Codice Comune numerico con 110
province (dal 2010 al 2016)``, ``… con 107 province (dal 2006 al 2009)``) read alike once their type
and their foreign key were added behind them.  So, in order:

1. a name that fits is shown whole;
2. else its end after "…" (``…Backward_DistributionEvents``): where sorted names differ;
3. names in sight that would still read the same get a window where each first differs from the
   others, from the start of that word, and their end (``…Backward…Events``, ``Codice del…ici)``);
4. any that still clash (a window too narrow to reach the difference, a name holding "…") show
   their literal start through the first character that differs from every other name, "…", and as
   much of their end as fits.  Two such starts always differ, and none reads as a whole name, so
   the names come out distinct whenever that start fits.

A row's label is its name and a note behind it (a column's type and keys, a view's "(view)").  The
note gives way first, being the same on many rows: it is cut at its end, or left out; a note that
says what the row is (``(view)``) can be marked to stay, and the name is then shortened to leave it
room.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

ELLIPSIS = "…"
WINDOW_ROUNDS = 3
"""Rounds of step 3: a new window may read like another name's text, which then gets one too."""

Measure = Callable[[str], float]
Fits = Callable[[str, str], bool]
"""``fits(name, text)``: whether ``text``, shown for ``name``, has room."""


class Label(NamedTuple):
    """One row: ``name``, then ``note`` (cut or left out first, unless ``note_stays``), in ``room``
    (the measure's units; rows of a tree have less of it the deeper they are indented)."""

    name: str
    room: float
    note: str = ""
    note_stays: bool = False


def common_prefix(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` share from their start."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def branches(names: Iterable[str]) -> dict[str, int]:
    """Where each of ``names`` first differs from all the others: its longest common prefix with
    any other, which is the longer of those with its neighbours in sorted order (a linear pass, not
    one comparison per pair)."""
    ordered = sorted(set(names))
    shared = [common_prefix(a, b) for a, b in itertools.pairwise(ordered)]
    return {
        name: max(shared[i - 1] if i > 0 else 0, shared[i] if i < len(shared) else 0)
        for i, name in enumerate(ordered)
    }


def word_start(name: str, at: int) -> int:
    """Where the word holding ``name[at]`` begins (after ``_``, a space, ``-`` or ``.``, or at a
    capital after a small letter): a window shows "Backward", not "ckward"."""
    start = at
    while start > 0:
        before, here = name[start - 1], name[start]
        if before in "_ -." or (here.isupper() and before.islower()):
            break
        start -= 1
    return start


def _widest(compose: Callable[[int], str], low: int, high: int, fits: Callable[[str], bool]) -> str | None:
    """The text ``compose(n)`` for the largest n in low..high that fits (it grows with n)."""
    best = None
    while low <= high:
        middle = (low + high) // 2
        text = compose(middle)
        if fits(text):
            best, low = text, middle + 1
        else:
            high = middle - 1
    return best


def shorten(name: str, fits: Callable[[str], bool], branch: int | None = None) -> str | None:
    """``name`` as it fits: whole, else its end after "…" (steps 1 and 2); or, given ``branch``
    (where it first differs from the names it reads like), a window from that word on and its end,
    "…" before each (none before a window from the start: step 3).  None when not even one character fits."""
    if fits(name):
        return name
    n = len(name)
    if branch is None:
        return _widest(lambda k: ELLIPSIS + name[n - k :], 1, n, fits)
    start = word_start(name, min(branch, n - 1))
    before = ELLIPSIS if start else ""

    def window(k: int) -> str:
        if start + k >= n - k:
            return before + name[start:]
        return before + name[start : start + k] + ELLIPSIS + name[n - k :]

    return _widest(window, 1, n, fits)


def head_and_end(name: str, head: int, fits: Callable[[str], bool]) -> str | None:
    """Step 4: ``name``'s first ``head`` characters, "…", and as much of its end as fits; None when
    the head and "…" alone do not fit or the head is the whole name."""
    n = len(name)
    if head >= n or not fits(name[:head] + ELLIPSIS):
        return None
    return _widest(lambda k: name[:head] + ELLIPSIS + name[n - k :], 1, n - head - 1, fits) or (
        name[:head] + ELLIPSIS
    )


def _clashes(shown: dict[str, str | None]) -> list[list[str]]:
    groups: dict[str, list[str]] = {}
    for name, text in shown.items():
        if text is not None:
            groups.setdefault(text, []).append(name)
    return [group for group in groups.values() if len(group) > 1]


def distinct_names(names: Sequence[str], fits: Fits) -> dict[str, str | None]:
    """Each of ``names`` (those in sight) as it fits (``fits(name, text)`` measures), two different
    names never reading the same where their literal starts have room (steps 1 to 4 of the module's
    docstring); None for a name not even one character of which fits."""
    unique = list(dict.fromkeys(names))

    def fits_for(name: str) -> Callable[[str], bool]:
        return lambda text: fits(name, text)

    shown = {name: shorten(name, fits_for(name)) for name in unique}
    for _round in range(WINDOW_ROUNDS):
        clashes = _clashes(shown)
        if not clashes:
            return shown
        for group in clashes:
            for name, branch in branches(group).items():
                if shown[name] != name:
                    shown[name] = shorten(name, fits_for(name), branch) or shown[name]
    apart = branches(unique)
    settled: set[str] = set()
    while clashes := _clashes(shown):
        changed = [name for group in clashes for name in group if shown[name] != name and name not in settled]
        if not changed:
            break  # the room does not allow: what is left reads alike (the tooltips tell them apart)
        for name in changed:
            settled.add(name)
            shown[name] = head_and_end(name, apart[name] + 1, fits_for(name)) or shown[name]
    return shown


def _cut_note(name: str, note: str, fits: Callable[[str], bool]) -> str:
    """``name`` and as much of ``note`` as fits, "…" after it; ``name`` alone when not one
    non-blank character of the note fits."""
    shown = _widest(lambda k: name + note[:k] + ELLIPSIS, 1, len(note) - 1, fits)
    if shown is None or not shown[len(name) : -1].strip():
        return name
    return shown


def _within(room: float, measure: Measure) -> Callable[[str], bool]:
    return lambda text: measure(text) <= room


def shown_labels(labels: Sequence[Label], measure: Measure = len) -> list[str]:
    """The text of each row in sight (``measure``: pixels, or characters with ``len``): whole when
    it fits its room; else the whole name with its note cut; else the name shortened by
    ``distinct_names`` among all the names in sight (with its note when the note stays).

    A name on several rows (a column ``id`` under several tables, a table and a column) is
    shortened once, to fit the narrowest; rows with room for it show it whole.  Rows whose names
    differ read differently wherever ``distinct_names`` can tell the names apart, unless a name
    holds "…" or one row's whole label is literally another's name and note.
    """
    rows: dict[str, list[tuple[str, float]]] = {}
    for label in labels:
        rows.setdefault(label.name, []).append((label.note if label.note_stays else "", label.room))

    def name_fits(name: str, text: str) -> bool:
        return all(measure(text + note) <= room for note, room in rows[name])

    names = distinct_names(list(rows), name_fits)
    texts = []
    cut = []  # the rows showing their whole name and part of their note
    for row, (name, room, note, note_stays) in enumerate(labels):
        shown = names[name]
        if measure(name + note) <= room or shown is None:
            texts.append(name + note)  # it fits; or nothing does, and the view elides it as it can
        elif not note_stays and measure(name) <= room:
            texts.append(_cut_note(name, note, _within(room, measure)))
            cut.append(row)
        else:
            texts.append(shown + (note if note_stays else ""))
    # A name holding spaces and a cut note can read as another name's start ("a  TE…" beside a
    # shortened "a  TE…xt"): such rows show their name alone, which no other text reads as.
    seen: dict[str, set[str]] = {}
    for label, text in zip(labels, texts, strict=True):
        seen.setdefault(text, set()).add(label.name)
    for row in cut:
        if len(seen[texts[row]]) > 1:
            texts[row] = labels[row].name
    return texts
