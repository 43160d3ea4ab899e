"""The formula-error cells of an ``.xlsx`` / ``.xlsm`` worksheet (``#DIV/0!``, ``#N/A``…), which
python-calamine hands over as empty cells.

A workbook of such cells read as empty lost what the sheet says (a sheet of nothing else was
refused as having no cells), so the sheet's XML is read once more for them: only a sheet whose
part holds an error cell (``t="e"``, found by a byte search of the decompressed stream) is parsed,
and then by expat in a stream, a block at a time, never whole.  This runs inside the importer child
on a file a stranger may have written, so it is bounded: a part is read at most
:data:`PART_BYTES` decompressed; a document type declaration (the door to entity expansion and
external entities, which no workbook needs) stops the parse; an error text is at most
:data:`ERROR_CHARS` characters; and at most :data:`MAX_ERRORS` cells are kept (the rest stay empty,
with a note).  Anything unexpected (not a ZIP, a missing part, XML that does not parse) leaves the
cells as calamine gave them: this reading only ever adds.
"""

from __future__ import annotations

import posixpath
import zipfile
from pathlib import Path
from xml.parsers import expat

PART_BYTES = 4 * 1024**3  # decompressed bytes of one part (calamine has read the whole part already)
BLOCK_BYTES = 1024 * 1024
ERROR_CHARS = 32  # "#GETTING_DATA" is Excel's longest error
MAX_ERRORS = 1_000_000
_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_RELATIONSHIPS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PACKAGE_RELATIONSHIPS = "http://schemas.openxmlformats.org/package/2006/relationships"

# {row: {column: error text}}, 0-based, as calamine numbers its rows and columns
Errors = dict[int, dict[int, str]]


class _Refused(Exception):
    """The part is not XML this reading takes (a DTD, too large, not well formed)."""


class _TooMany(Exception):
    """More error cells than :data:`MAX_ERRORS`."""


class WorkbookErrors:
    """The error cells of each worksheet of one workbook, read when a sheet is asked for."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.capped = False  # some sheet had more than MAX_ERRORS error cells
        self._parts: dict[str, str] | None = None

    def of_sheet(self, name: str) -> Errors:
        """The error cells of the worksheet ``name`` (empty when it has none, or they cannot be read)."""
        try:
            with zipfile.ZipFile(self.path) as book:
                if self._parts is None:
                    self._parts = _sheet_parts(book)
                part = self._parts.get(name)
                if part is None or not _holds_errors(book, part):
                    return {}
                errors: Errors = {}
                try:
                    _parse(book, part, _CellsReader(errors).handlers())
                except _TooMany:
                    self.capped = True
                return errors
        except (
            zipfile.BadZipFile,
            KeyError,
            OSError,
            RuntimeError,
            ValueError,
            NotImplementedError,
            _Refused,
            expat.ExpatError,
        ):
            return {}


def _holds_errors(book: zipfile.ZipFile, part: str) -> bool:
    """Whether the part's bytes hold ``t="e"`` (or ``t='e'``): a search, a block at a time."""
    tail = b""
    read = 0
    with book.open(part) as stream:  # KeyError for a part that is not there
        while block := stream.read(BLOCK_BYTES):
            read += len(block)
            if read > PART_BYTES:
                return False
            window = tail + block
            if b't="e"' in window or b"t='e'" in window:
                return True
            tail = window[-8:]
    return False


def _parser() -> expat.XMLParserType:
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def refuse(*_args: object) -> None:
        raise _Refused("a document type declaration")

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    return parser


def _parse(book: zipfile.ZipFile, part: str, handlers: dict[str, object]) -> None:
    """Feed the part to an expat parser with ``handlers``, a block at a time."""
    parser = _parser()
    for name, handler in handlers.items():
        setattr(parser, name, handler)
    read = 0
    with book.open(part) as stream:  # KeyError for a part that is not there
        while block := stream.read(BLOCK_BYTES):
            read += len(block)
            if read > PART_BYTES:
                raise _Refused("too large")
            parser.Parse(block, False)
    parser.Parse(b"", True)


def _sheet_parts(book: zipfile.ZipFile) -> dict[str, str]:
    """Each worksheet's name and the path of its part in the package."""
    ids: dict[str, str] = {}  # sheet name -> relationship id
    targets: dict[str, str] = {}  # relationship id -> part path

    def sheet(name: str, attrs: dict[str, str]) -> None:
        if name == f"{_MAIN} sheet" and "name" in attrs:
            ids[attrs["name"]] = attrs.get(f"{_RELATIONSHIPS} id", "")

    def relationship(name: str, attrs: dict[str, str]) -> None:
        if name == f"{_PACKAGE_RELATIONSHIPS} Relationship" and "Id" in attrs:
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

    A row or cell without its ``r`` reference follows the one before it, as the format allows."""

    def __init__(self, errors: Errors) -> None:
        self.errors = errors
        self.count = 0
        self.row = -1
        self.column = -1
        self.in_error = False
        self.in_value = False
        self.text: list[str] = []

    def handlers(self) -> dict[str, object]:
        return {
            "StartElementHandler": self.start,
            "EndElementHandler": self.end,
            "CharacterDataHandler": self.data,
        }

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if name == f"{_MAIN} c":
            where = _position(attrs["r"]) if "r" in attrs else None
            if where is not None:
                self.row, self.column = where
            else:
                self.column += 1
            self.in_error = attrs.get("t") == "e"
            self.text = []
        elif name == f"{_MAIN} row":
            reference = attrs.get("r", "")
            self.row = int(reference) - 1 if reference.isdigit() else self.row + 1
            self.column = -1
        elif name == f"{_MAIN} v" and self.in_error:
            self.in_value = True

    def data(self, text: str) -> None:
        if self.in_value and sum(map(len, self.text)) <= ERROR_CHARS:
            self.text.append(text)

    def end(self, name: str) -> None:
        if name == f"{_MAIN} v":
            self.in_value = False
        elif name == f"{_MAIN} c" and self.in_error:
            self.in_error = False
            text = "".join(self.text).strip()
            if text and len(text) <= ERROR_CHARS and self.row >= 0 and self.column >= 0:
                if self.count >= MAX_ERRORS:
                    raise _TooMany()
                self.errors.setdefault(self.row, {})[self.column] = text
                self.count += 1
