"""Which type a column of text cells has, decided over every cell, and the SQL that converts it.

A column is INTEGER, REAL, BOOLEAN, DATE, DATETIME or TIME only when every non-empty cell has that
form; one cell that does not makes the column TEXT, and text keeps the cell exactly as it was
written.  So ZIP codes and IDs with a leading zero (``01``, ``007``) are never numbers, integers
too large for SQLite's 64 bits stay exact as text, and dates stay ISO-8601 text (the form the SQaLe
training schemas use), declared DATE/DATETIME/TIME so the model knows what they hold.

Dates written day-first or month-first (``20.01.1979``, ``11/13/2024``, ``13-11-2024``) become
ISO-8601 text too, so that ``ORDER BY``, ``BETWEEN`` and ``strftime`` work on them; but only where
the column itself says which layout it uses: one cell whose first part is above 12 makes the whole
column day-first, one whose second part is, month-first.  A column where every part could be either
(``03/04/2024``: March or April?) stays text, as written, and the import's note says why; so does a
column of two-digit years (``01-01-13``): which century, and even which part is the year, would be
a guess (Excel, Python's ``%y`` and the locales pivot differently), and a wrong date is worse than
text the user can convert knowingly.  One column may mix ``.``, ``/`` and ``-``; a part may have
one digit or two; the year has four.

Checking each cell in Python would cost more than the whole rest of an import, so a batch of one
column is joined with line breaks and matched by one compiled pattern (``(?:X)(?:\\n(?:X))*``), in C.
A cell with a line break in it is text anyway, and it is caught by counting the breaks.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any, Protocol

INTEGER = "INTEGER"
REAL = "REAL"
BOOLEAN = "BOOLEAN"
DATE = "DATE"
DATETIME = "DATETIME"
TIME = "TIME"
TEXT = "TEXT"
# Internal candidates: dates in another layout, declared DATE once converted (see the docstring).
DAY_FIRST = "DATE day-first"
MONTH_FIRST = "DATE month-first"
SHORT_YEAR = "DATE two-digit year"
REAL_COMMA = "REAL with a decimal comma"  # a form the cells are asked about, never a column's type

_INT = r"-?(?:0|[1-9][0-9]{0,18})"
_EXP = r"(?:[eE][-+]?[0-9]{1,3})"
# An integer part of at most 15 digits without a fraction: longer integers are exact only as text.
_REAL = rf"-?(?:(?:0|[1-9][0-9]{{0,14}})|(?:0|[1-9][0-9]*)\.[0-9]*|\.[0-9]+){_EXP}?"
_REAL_COMMA = r"-?(?:(?:0|[1-9][0-9]{0,14})|(?:0|[1-9][0-9]*),[0-9]*|,[0-9]+)"
_BOOL = r"(?i:true|false)"
_DATE = r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
_CLOCK = r"(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,9})?)?"
_DATETIME = rf"{_DATE}(?:[T ]{_CLOCK}(?:Z|[+-][0-9]{{2}}:?[0-9]{{2}})?)?"
_DAY = r"(?:0?[1-9]|[12][0-9]|3[01])"
_MONTH = r"(?:0?[1-9]|1[0-2])"
_SEPARATORS = (r"\.", "/", "-")


def _layouts(first: str, second: str, year: str) -> str:
    """The date form ``first``, ``second``, ``year`` with one separator (RE2 has no backreference)."""
    return "|".join(f"{first}{sep}{second}{sep}{year}" for sep in _SEPARATORS)


_DAY_FIRST = _layouts(_DAY, _MONTH, "[0-9]{4}")
_MONTH_FIRST = _layouts(_MONTH, _DAY, "[0-9]{4}")
_SHORT_YEAR = _layouts("[0-9]{1,2}", "[0-9]{1,2}", "[0-9]{2}")
# The parts of a day- or month-first date, for its conversion to ISO in Arrow.
_DATE_PARTS = r"^(?P<a>[0-9]{1,2})[./-](?P<b>[0-9]{1,2})[./-](?P<y>[0-9]{4})$"


def _lines(atom: str) -> re.Pattern[str]:
    return re.compile(rf"(?:{atom})(?:\n(?:{atom}))*")


_PATTERNS: dict[str, re.Pattern[str]] = {
    INTEGER: _lines(_INT),
    REAL: _lines(_REAL),
    BOOLEAN: _lines(_BOOL),
    DATE: _lines(_DATE),
    DATETIME: _lines(_DATETIME),
    TIME: _lines(_CLOCK),
    DAY_FIRST: _lines(_DAY_FIRST),
    MONTH_FIRST: _lines(_MONTH_FIRST),
    SHORT_YEAR: _lines(_SHORT_YEAR),
}
_REAL_COMMA_PATTERN = _lines(_REAL_COMMA)
# The same forms for one cell at a time (RE2 syntax, which these patterns share with ``re``).
_ANCHORED = {
    INTEGER: f"^(?:{_INT})$",
    REAL: f"^(?:{_REAL})$",
    BOOLEAN: f"^(?:{_BOOL})$",
    DATE: f"^(?:{_DATE})$",
    DATETIME: f"^(?:{_DATETIME})$",
    TIME: f"^(?:{_CLOCK})$",
    DAY_FIRST: f"^(?:{_DAY_FIRST})$",
    MONTH_FIRST: f"^(?:{_MONTH_FIRST})$",
    SHORT_YEAR: f"^(?:{_SHORT_YEAR})$",
}
_ANCHORED_REAL_COMMA = f"^(?:{_REAL_COMMA})$"
_NINETEEN_DIGITS = re.compile(r"(?m)^-?[0-9]{19}$")
_SIXTEEN_DIGITS = re.compile(r"[0-9]{16}")
_INT64_MAX = 2**63 - 1


class FormulaError(str):
    """A spreadsheet cell whose formula ended in an error; its text is the error's (``#DIV/0!``).

    The guess leaves such cells out (:class:`TextCells`), as it does empty ones: one failed formula
    does not make a column of numbers text, where ``SUM``, ``AVG`` and ``ORDER BY`` would treat
    every number as a string.  In a column that takes a type the error is NULL (the value is not
    known, which is what the error says), and the note names it; in a text column it is kept as
    written."""


class Cells(Protocol):
    """One batch of one column's cells, asked the questions the type rules ask (:meth:`ColumnGuess.
    update`); an empty cell holds no value and has every form."""

    def empty(self) -> bool:
        """Whether no cell holds a value."""
        ...

    def holds(self, substring: str) -> bool:
        """Whether some cell holds ``substring``."""
        ...

    def sixteen_digits(self) -> bool:
        """Whether some cell holds 16 digits in a row (an integer REAL cannot hold exactly)."""
        ...

    def every(self, form: str) -> bool:
        """Whether every cell that holds a value has the form ``form`` (a type, or REAL_COMMA)."""
        ...


class TextCells:
    """Python strings (the general path): the batch's values joined by line breaks, so that each
    question is one search or one match of a compiled pattern, in C.  A cell with a line break in it
    is text, so it has no form.

    ``errors`` (a sheet's cells): each :class:`FormulaError` is counted there by its text and left
    out of the values."""

    def __init__(self, cells: Sequence[str | None], errors: dict[str, int] | None = None) -> None:
        values = list(filter(None, cells))
        if errors is not None:
            for error in [v for v in values if type(v) is FormulaError]:
                errors[error] = errors.get(error, 0) + 1
            values = [v for v in values if type(v) is not FormulaError]
        self._count = len(values)
        self._joined = "\n".join(values)
        self._broken = self._count > 0 and self._joined.count("\n") != self._count - 1

    def empty(self) -> bool:
        return self._count == 0

    def holds(self, substring: str) -> bool:
        return substring in self._joined

    def sixteen_digits(self) -> bool:
        return _SIXTEEN_DIGITS.search(self._joined) is not None

    def every(self, form: str) -> bool:
        if self._broken:
            return False
        pattern = _REAL_COMMA_PATTERN if form == REAL_COMMA else _PATTERNS[form]
        if pattern.fullmatch(self._joined) is None:
            return False
        return form != INTEGER or _fits_int64(self._joined)


class ArrowCells:
    """An Arrow string array, empty cells null (the fast CSV path, :mod:`.fast_text`, which never
    turns its cells into Python strings).

    A regular expression costs RE2 about 70 ns a cell, most of this path's checking time, so each
    form takes the cheapest exact test (:func:`_every_arrow`): booleans compare the lower-cased cell
    with two words, and a column whose longest cell has under 16 characters has no 16-digit
    integer."""

    def __init__(self, cells: Any) -> None:
        self._cells = cells
        self._longest: int | None = None

    def _longest_cell(self) -> int:
        import pyarrow.compute as pc

        if self._longest is None:
            self._longest = pc.max(pc.utf8_length(self._cells)).as_py() or 0
        return self._longest

    def empty(self) -> bool:
        return bool(self._cells.null_count == len(self._cells))

    def holds(self, substring: str) -> bool:
        import pyarrow.compute as pc

        return bool(pc.any(pc.match_substring(self._cells, substring)).as_py())

    def sixteen_digits(self) -> bool:
        import pyarrow.compute as pc

        if self._longest_cell() < 16:
            return False
        return bool(pc.any(pc.match_substring_regex(self._cells, _SIXTEEN_DIGITS.pattern)).as_py())

    def every(self, form: str) -> bool:
        import pyarrow.compute as pc

        cells = self._cells
        if form == BOOLEAN:
            lower = pc.utf8_lower(cells)
            return bool(pc.all(pc.or_(pc.equal(lower, "true"), pc.equal(lower, "false"))).as_py())
        if form == REAL_COMMA:
            return bool(pc.all(pc.match_substring_regex(cells, _ANCHORED_REAL_COMMA)).as_py())
        return _every_arrow(form, cells, self._longest_cell())


class ColumnGuess:
    """The type one column can still have, narrowed batch by batch.

    ``decimal_comma``: the file is ``;``-separated, where ``3,25`` is a number (European exports);
    then REAL accepts the comma and the conversion turns it into a point.
    """

    def __init__(self, decimal_comma: bool = False) -> None:
        self.decimal_comma = decimal_comma
        self.candidates = [INTEGER, REAL, BOOLEAN, DATE, DATETIME, TIME, DAY_FIRST, MONTH_FIRST, SHORT_YEAR]
        self.seen_value = False
        self.comma_seen = False
        self.errors: dict[str, int] = {}  # formula error cells by their text (TextCells(errors=))

    def update(self, cells: Cells) -> None:
        """Keep the types every value of ``cells`` fits (the rules, written once for every kind
        of :class:`Cells`)."""
        if not self.candidates or cells.empty():
            return
        self.seen_value = True
        kept: list[str] = []
        for kind in self.candidates:
            if kind == REAL and self.decimal_comma and cells.holds(","):
                if not cells.holds(".") and cells.every(REAL_COMMA):
                    self.comma_seen = True
                    kept.append(kind)
                continue
            if kind == REAL and self.comma_seen:
                continue  # a column cannot use both the comma and the point
            if kind == REAL and INTEGER in kept:
                # Integers are REAL unless one has more than 15 digits: a search, not a second match.
                if not cells.sixteen_digits():
                    kept.append(kind)
                continue
            if kind == DATETIME and DATE in kept:
                kept.append(kind)  # a date is a DATETIME without its time
                continue
            if cells.every(kind):
                kept.append(kind)
        self.candidates = kept

    def result(self) -> str:
        """The declared type: the narrowest one every cell fits, TEXT when none or no value.

        Dates in another layout are DATE when exactly one layout fits (:attr:`date_layout`)."""
        if not self.seen_value or not self.candidates:
            return TEXT
        first = self.candidates[0]
        if first in (DAY_FIRST, MONTH_FIRST, SHORT_YEAR):
            return DATE if self.date_layout is not None else TEXT
        return first

    @property
    def date_layout(self) -> str | None:
        """DAY_FIRST or MONTH_FIRST: the one layout every cell of a date column has, whose cells
        the conversion turns into ISO-8601; None for any other column (ISO dates included)."""
        if not self.seen_value:
            return None
        layouts = [kind for kind in self.candidates if kind in (DAY_FIRST, MONTH_FIRST)]
        if len(layouts) != 1 or self.candidates[0] != layouts[0]:
            return None
        return layouts[0]

    def note(self) -> str | None:
        """Why a column of dates stays text, for the import's note; None when it does not."""
        if not self.seen_value or not self.candidates or self.result() != TEXT:
            return None
        if self.candidates[0] == SHORT_YEAR:
            return (
                "its dates have two-digit years, so it is kept as text (the century, and which part "
                "is the year, would be a guess)"
            )
        if self.candidates[0] == DAY_FIRST:  # both layouts fit: no part above 12
            return (
                "its dates could be day-first or month-first (no day is above 12), so it is kept "
                "as text; written as YYYY-MM-DD they would be read as dates"
            )
        return None


def _every_arrow(kind: str, cells: Any, longest: int) -> bool:
    """Whether every non-null cell of the Arrow array has the form of ``kind`` (the patterns above).

    Arrow's casts test most of a form at a few ns a cell; where a cast accepts more than the pattern
    (``0x10`` and ``007`` as integers) the difference is tested on its own, and where no cheap test
    can say yes (reals: ``inf``, ``+1``, ``01.5``) the pattern decides."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def casts(to: Any) -> bool:
        try:
            pc.cast(cells, to)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return False
        return True

    def some(mask: Any) -> bool:
        return bool(pc.any(mask).as_py())

    if kind == INTEGER:
        # The cast reads an optional '-' (never '+', never a space) and digits within 64 bits, and
        # also hexadecimal and leading zeros: a first '0' is allowed only as the whole number.
        if longest > 20 or not casts(pa.int64()):
            return False
        length = pc.utf8_length(cells)
        zero = pc.and_(pc.starts_with(cells, "0"), pc.greater(length, 1))
        minus_zero = pc.and_(pc.starts_with(cells, "-0"), pc.greater(length, 2))
        return not (some(zero) or some(minus_zero))
    if kind in (DAY_FIRST, MONTH_FIRST, SHORT_YEAR) and longest > (8 if kind == SHORT_YEAR else 10):
        return False  # longer than "dd.mm.yyyy": the pattern need not look
    if kind == REAL and not casts(pa.float64()):
        return False  # a quick no; a yes needs the pattern (no cheaper test of its form was found)
    if kind == DATE and pc.min(pc.utf8_length(cells)).as_py() == 10 == longest and casts(pa.date32()):
        return True  # the cast takes exactly YYYY-MM-DD, and only real days (the pattern also 02-30)
    return bool(pc.all(pc.match_substring_regex(cells, _ANCHORED[kind])).as_py())


def date_notes(names: Sequence[str], guesses: Sequence[ColumnGuess]) -> list[str]:
    """The import's notes on the date columns of one table that stay text (both paths add them)."""
    return [
        f"column {name!r}: {note}"
        for name, guess in zip(names, guesses, strict=False)
        if (note := guess.note())
    ]


def error_notes(names: Sequence[str], guesses: Sequence[ColumnGuess]) -> list[str]:
    """The notes on a sheet's formula error cells: which column, how many, and what became of them."""
    notes = []
    for name, guess in zip(names, guesses, strict=False):
        if not guess.errors:
            continue
        count = sum(guess.errors.values())
        which = ", ".join(sorted(guess.errors))
        kind = guess.result()
        fate = "kept as their error text" if kind == TEXT else f"NULL in this {kind} column"
        notes.append(f"column {name!r}: {count:,} formula error cell(s) ({which}), {fate}")
    return notes


def iso_dates_arrow(cells: Any, layout: str) -> Any:
    """The Arrow string array of ``layout`` dates (DAY_FIRST, MONTH_FIRST) as ISO-8601 text:
    :func:`convert_sql`'s rule for the fast CSV path."""
    import pyarrow.compute as pc

    parts = pc.extract_regex(cells, _DATE_PARTS)
    first = pc.utf8_lpad(pc.struct_field(parts, [0]), width=2, padding="0")
    second = pc.utf8_lpad(pc.struct_field(parts, [1]), width=2, padding="0")
    day, month = (first, second) if layout == DAY_FIRST else (second, first)
    return pc.binary_join_element_wise(pc.struct_field(parts, [2]), month, day, "-")


def _fits_int64(joined: str) -> bool:
    return all(abs(int(m.group())) <= _INT64_MAX for m in _NINETEEN_DIGITS.finditer(joined))


def convert_sql(
    column: str,
    kind: str,
    comma: bool,
    date_layout: str | None = None,
    errors: Collection[str] = (),
) -> str:
    """The SQL expression that turns the staged text ``column`` (quoted) into a ``kind`` value;
    ``date_layout`` (:attr:`ColumnGuess.date_layout`) says a DATE column's cells are day-first or
    month-first dates to rewrite as ISO-8601.

    Empty cells are NULL whatever the type; so are the formula ``errors`` (their texts) in a column
    that is not TEXT (:class:`FormulaError`: no value of such a column has an error's text).
    """
    if errors and kind != TEXT:
        listed = ", ".join("'" + text.replace("'", "''") + "'" for text in sorted(errors))
        typed = convert_sql(column, kind, comma, date_layout)
        return f"CASE WHEN {column} IN ({listed}) THEN NULL ELSE {typed} END"
    cell = f"NULLIF({column}, '')"
    if date_layout is not None:
        return _iso_date_sql(cell, date_layout == DAY_FIRST)
    if kind == INTEGER:
        return f"CAST({cell} AS INTEGER)"
    if kind == REAL:
        return f"CAST(replace({cell}, ',', '.') AS REAL)" if comma else f"CAST({cell} AS REAL)"
    if kind == BOOLEAN:
        return f"CASE lower({column}) WHEN 'true' THEN 1 WHEN 'false' THEN 0 END"
    return cell


def _iso_date_sql(cell: str, day_first: bool) -> str:
    """``cell`` (``d.m.yyyy``, ``m/d/yyyy``…, one or two digits a part) as ``yyyy-mm-dd``.

    ``CAST('20/01/1979' AS INTEGER)`` reads the leading number (20), so each part is a cast of
    what follows the previous separator."""
    slashed = f"replace(replace({cell}, '.', '/'), '-', '/')"
    rest = f"substr({slashed}, instr({slashed}, '/') + 1)"
    first = f"CAST({slashed} AS INTEGER)"
    second = f"CAST({rest} AS INTEGER)"
    year = f"substr({rest}, instr({rest}, '/') + 1)"
    day, month = (first, second) if day_first else (second, first)
    return f"CASE WHEN {cell} IS NULL THEN NULL ELSE printf('%s-%02d-%02d', {year}, {month}, {day}) END"
