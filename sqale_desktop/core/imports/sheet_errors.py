"""The formula-error cells of an ``.xlsx`` / ``.xlsm`` worksheet (``#DIV/0!``, ``#N/A``…), which
python-calamine hands over as empty cells.

A workbook of such cells read as empty lost what the sheet says (a sheet of nothing else was
refused as having no cells), so the sheet's XML is read once more for them.  Parsing a whole sheet
again in Python would cost more than calamine's own read (1.1 s of expat callbacks for a million
cells, against calamine's 0.7 s), so the part is scanned in C, a block at a time: decompressed,
searched for ``t="e"``, and only the rows that hold one are parsed, each on its own, by expat
(:class:`_CellsReader`).  A row without its ``r`` number (the format allows it; Excel, LibreOffice
and the Python writers always write it) sends the sheet to a full parse of the part instead.

This runs inside the importer child on a file a stranger may have written, so it is bounded: a
part is read at most :data:`PART_BYTES` decompressed, a row at most :data:`ROW_BYTES`; a document
type declaration (the door to entity expansion and external entities, which no workbook needs)
stops the reading; an error text is at most :data:`ERROR_CHARS` characters; and at most
:data:`MAX_ERRORS` cells are kept (the rest stay empty, with a note).  Anything unexpected (not a
ZIP, a missing part, XML that does not parse) leaves the cells as calamine gave them: this reading
only ever adds.
"""

from __future__ import annotations

import posixpath
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.parsers import expat

PART_BYTES = 4 * 1024**3  # decompressed bytes of one part (calamine has read the whole part already)
ROW_BYTES = 64 * 1024 * 1024  # one row's XML
BLOCK_BYTES = 1024 * 1024
ERROR_CHARS = 32  # "#GETTING_DATA" is Excel's longest error
MAX_ERRORS = 1_000_000
_BEFORE_ERROR_TYPE = re.compile(rb"\st\s*=\s*$")  # `` t=`` just before a quoted ``e``
_ROW_START = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?row[\s>/]")
_ROW_END = re.compile(rb"</(?:[A-Za-z_][\w.-]*:)?row\s*>")
_DECLARATION = re.compile(rb"<!(?:DOCTYPE|ENTITY)")

# {row: {column: error text}}, 0-based, as calamine numbers its rows and columns
Errors = dict[int, dict[int, str]]


class _Refused(Exception):
    """The part is not XML this reading takes (a DTD, too large, not well formed)."""


class _TooMany(Exception):
    """More error cells than :data:`MAX_ERRORS`."""


class _Unnumbered(Exception):
    """A row that holds an error has no ``r``: only a parse of the whole part can place it."""


class WorkbookErrors:
    """The error cells of each worksheet of one workbook, read when a sheet is asked for."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.capped = False  # some sheet had more than MAX_ERRORS error cells
        self._parts: dict[str, str] | None = None

    def of_sheet(self, name: str) -> Errors:
        """The error cells of the worksheet ``name`` (empty when it has none, or they cannot be read)."""
        errors: Errors = {}
        try:
            with zipfile.ZipFile(self.path) as book:
                if self._parts is None:
                    self._parts = _sheet_parts(book)
                part = self._parts.get(name)
                if part is None:
                    return {}
                try:
                    try:
                        _scan(book, part, errors)
                    except _Unnumbered:
                        errors.clear()
                        _parse(book, part, _CellsReader(errors, numbered=False).handlers())
                except _TooMany:
                    self.capped = True
                return errors
        except (
            *(zipfile.BadZipFile, KeyError, OSError, RuntimeError, ValueError, NotImplementedError),
            *(_Refused, expat.ExpatError),
        ):
            return {}


def _blocks(book: zipfile.ZipFile, part: str) -> Iterator[bytes]:
    """The part's decompressed bytes, a block at a time, refused past :data:`PART_BYTES`."""
    read = 0
    with book.open(part) as stream:  # KeyError for a part that is not there
        while block := stream.read(BLOCK_BYTES):
            read += len(block)
            if read > PART_BYTES:
                raise _Refused("too large")
            yield block


def _scan(book: zipfile.ZipFile, part: str, errors: Errors) -> None:
    """Find the rows of the part that hold an error cell, and parse those alone.  Every search is
    a ``bytes.find`` (in C, at memory speed); a regular expression only confirms what one found."""
    reader = _CellsReader(errors, numbered=True)
    carry = b""
    for block in _blocks(book, part):
        data = carry + block
        if b"<!" in data and _DECLARATION.search(data):
            raise _Refused("a document type declaration")
        cut = _after_last_row(data)
        region, carry = data[:cut], data[cut:]
        if len(carry) > ROW_BYTES:
            raise _Refused("a row too large")
        if b"'e'" in region or b'"e"' in region:
            _parse_rows(region, reader)


def _after_last_row(data: bytes) -> int:
    """Where the last whole row of ``data`` ends (0: none ends in it)."""
    end = len(data)
    while (at := data.rfind(b"row", 0, end)) >= 0:
        opening = data.rfind(b"<", 0, at)
        found = _ROW_END.match(data, opening) if opening >= 0 else None
        if found is not None and found.start() == opening and data.find(b"row", opening) == at:
            return found.end()
        end = at
    return 0


def _row_before(region: bytes, at: int) -> int:
    """Where the row that holds position ``at`` starts (-1: none)."""
    end = at
    while (found := region.rfind(b"row", 0, end)) >= 0:
        opening = region.rfind(b"<", 0, found)
        start = _ROW_START.match(region, opening) if opening >= 0 else None
        if start is not None and start.end() == found + 4:
            return opening
        end = found
    return -1


def _error_types(region: bytes) -> list[int]:
    """The positions of the ``t="e"`` attributes (either quote) in ``region``, in order."""
    found = []
    for quoted in (b'"e"', b"'e'"):
        at = region.find(quoted)
        while at >= 0:
            if _BEFORE_ERROR_TYPE.search(region, max(0, at - 16), at):
                found.append(at)
            at = region.find(quoted, at + 3)
    return sorted(found)


def _parse_rows(region: bytes, reader: _CellsReader) -> None:
    """Parse each row of ``region`` (whole rows) that holds an error cell."""
    done = -1
    for at in _error_types(region):
        start = _row_before(region, at)
        if start < 0 or start == done:
            continue  # outside any row, or in a row already parsed
        end = _ROW_END.search(region, at)
        if end is None:
            continue
        done = start
        parser = _parser()
        for name, handler in reader.handlers().items():
            setattr(parser, name, handler)
        parser.Parse(region[start : end.end()], True)


def _parser() -> expat.XMLParserType:
    """An expat parser that stops at a document type declaration (its names keep their prefixes:
    a row is parsed without the root that declares them)."""
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def refuse(*_args: object) -> None:
        raise _Refused("a document type declaration")

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    return parser


def _parse(book: zipfile.ZipFile, part: str, handlers: dict[str, Any]) -> None:
    """Feed the whole part to an expat parser with ``handlers``, a block at a time."""
    parser = _parser()
    for name, handler in handlers.items():
        setattr(parser, name, handler)
    for block in _blocks(book, part):
        parser.Parse(block, False)
    parser.Parse(b"", True)


def _local(name: str) -> str:
    return name.rpartition(":")[2]


def _sheet_parts(book: zipfile.ZipFile) -> dict[str, str]:
    """Each worksheet's name and the path of its part in the package."""
    ids: dict[str, str] = {}  # sheet name -> relationship id
    targets: dict[str, str] = {}  # relationship id -> part path

    def sheet(name: str, attrs: dict[str, str]) -> None:
        if _local(name) == "sheet" and "name" in attrs:
            ids[attrs["name"]] = next((v for k, v in attrs.items() if k.endswith(":id")), "")

    def relationship(name: str, attrs: dict[str, str]) -> None:
        if _local(name) == "Relationship" and "Id" in attrs:
            target = attrs.get("Target", "")
            path = target.lstrip("/") if target.startswith("/") else posixpath.join("xl", target)
            targets[attrs["Id"]] = posixpath.normpath(path)

    _parse(book, "xl/workbook.xml", {"StartElementHandler": sheet})
    _parse(book, "xl/_rels/workbook.xml.rels", {"StartElementHandler": relationship})
    return {name: targets[rid] for name, rid in ids.items() if rid in targets}


def _position(ref: str) -> tuple[int, int] | None:
    """``B3`` as (row 2, column 1); None for a reference that is not a cell's."""
    letters = 0
    column = 0
    for char in ref:
        if "A" <= char <= "Z":
            column = column * 26 + ord(char) - 64
            letters += 1
        else:
            break
    digits = ref[letters:]
    if not 0 < letters <= 3 or not digits.isdigit():
        return None
    return int(digits) - 1, column - 1


class _CellsReader:
    """Expat handlers that collect a worksheet's ``<c t="e"><v>#DIV/0!</v></c>`` cells into ``errors``.

    A cell without its ``r`` reference follows the one before it, as the format allows, and so
    does a row without its number when the whole part is parsed; ``numbered``: only rows are
    parsed, so such a row cannot be placed (:class:`_Unnumbered`)."""

    def __init__(self, errors: Errors, numbered: bool) -> None:
        self.errors = errors
        self.numbered = numbered
        self.count = 0
        self.row = -1
        self.column = -1
        self.in_error = False
        self.in_value = False
        self.text: list[str] = []

    def handlers(self) -> dict[str, Any]:
        return {
            "StartElementHandler": self.start,
            "EndElementHandler": self.end,
            "CharacterDataHandler": self.data,
        }

    def start(self, name: str, attrs: dict[str, str]) -> None:
        local = _local(name)
        if local == "c":
            where = _position(attrs["r"]) if "r" in attrs else None
            if where is not None:
                self.row, self.column = where
            else:
                self.column += 1
            self.in_error = attrs.get("t") == "e"
            self.text = []
        elif local == "row":
            number = attrs.get("r", "")
            if not number.isdigit() and self.numbered:
                raise _Unnumbered()
            self.row = int(number) - 1 if number.isdigit() else self.row + 1
            self.column = -1
        elif local == "v" and self.in_error:
            self.in_value = True

    def data(self, text: str) -> None:
        if self.in_value and sum(map(len, self.text)) <= ERROR_CHARS:
            self.text.append(text)

    def end(self, name: str) -> None:
        local = _local(name)
        if local == "v":
            self.in_value = False
        elif local == "c" and self.in_error:
            self.in_error = False
            text = "".join(self.text).strip()
            if text and len(text) <= ERROR_CHARS and self.row >= 0 and self.column >= 0:
                if self.count >= MAX_ERRORS:
                    raise _TooMany()
                self.errors.setdefault(self.row, {})[self.column] = text
                self.count += 1
