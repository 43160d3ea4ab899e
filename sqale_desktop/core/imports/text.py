"""CSV, TSV and text files, plain or gzipped: encoding, delimiter and header found from the bytes.

The standard library's ``csv`` reader does the parsing: it is in C, it follows RFC 4180 quoting
(quoted commas, doubled quotes, line breaks inside quotes) and, on a file opened with
``newline=''``, it accepts LF, CRLF and old-Mac CR-only line ends alike.  Its ``Sniffer`` guesses
badly on real exports (a ``;`` file whose decimal commas outnumber the separators), so the
delimiter is the candidate that splits the first lines into the same number of fields most often.

Encodings: a BOM decides (UTF-8, UTF-16, UTF-32); UTF-16 without one shows as NULs in every other
byte; otherwise UTF-8 is tried, and a file that is not UTF-8 is given to ``charset-normalizer``
(imported only then), falling back to cp1252, the usual codec of spreadsheet exports; a file with
bytes that codec does not define is read as Latin-1, which maps every byte.
"""

from __future__ import annotations

import codecs
import csv
import functools
import gzip
import io
import itertools
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from sqale_desktop.core.imports.progress import ImportFailed, Meter

SAMPLE_BYTES = 256 * 1024
DELIMITERS = (",", ";", "\t", "|")
# Magic numbers of binary formats someone may name .csv (the first bytes of the file).
_MAGIC = {
    b"PK\x03\x04": "a ZIP archive (an Excel workbook?)",
    b"SQLite format 3\x00": "a SQLite database",
    b"PAR1": "a Parquet file",
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1": "an OLE2 file (an old .xls or an encrypted workbook)",
    b"%PDF": "a PDF document",
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"\x1f\x8b": "a gzip archive",
}

# Codecs of scripts other than Latin, where charset-normalizer's guess is taken (codecs' names).
_OTHER_SCRIPTS = frozenset(
    {
        "cp1251",
        "koi8-r",
        "koi8-u",
        "iso8859-5",
        "mac-cyrillic",
        "cp866",
        "cp1253",
        "iso8859-7",
        "cp1255",
        "iso8859-8",
        "cp1256",
        "iso8859-6",
        "cp874",
        "tis-620",
        "shift_jis",
        "cp932",
        "euc_jp",
        "gb2312",
        "gbk",
        "gb18030",
        "big5",
        "cp950",
        "euc_kr",
        "cp949",
        "johab",
        "cp1258",
    }
)
# A long JSON or text cell is data; a field of gigabytes (a few MB of .gz can hold one) is not: the
# csv module holds a field as 4 bytes a character, so the bound is what keeps memory in hand.
FIELD_CHARS = 32 * 1024 * 1024
# A line of more than this many bytes with no line break in it is refused as it is read (before
# ``readline`` makes it one string): the field limit alone would come only after the whole line.
LINE_BYTES = 64 * 1024 * 1024
csv.field_size_limit(FIELD_CHARS)


@dataclass
class TextTable:
    """A table of text cells: ``headers`` may grow while ``batches`` runs (a row longer than the
    header, a JSON key first seen late); each batch's rows are lists of cells, None for missing."""

    name: str
    headers: list[str]
    batches: Iterator[list[list[str | None]]]
    decimal_comma: bool = False
    notes: list[str] = field(default_factory=list)
    formula_errors: bool = False  # some cells are a sheet's formula errors (.types.FormulaError)


class _Counting(io.RawIOBase):
    """Counts the bytes read from the file on disk (before decompression), for the progress bar."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = self._raw.readinto(buffer)  # type: ignore[attr-defined]
        self.count += n or 0
        return n or 0

    def close(self) -> None:
        self._raw.close()
        super().close()


class _OwnGzip(gzip.GzipFile):
    """A ``GzipFile`` that closes the file it reads when it is closed (one given as ``fileobj`` is
    left open by ``GzipFile``: a refused ``.gz`` kept its file open until the garbage collector)."""

    def __init__(self, owned: IO[bytes]) -> None:
        super().__init__(fileobj=owned, mode="rb")
        self._owned = owned

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._owned.close()


def open_bytes(path: Path) -> tuple[IO[bytes], _Counting]:
    """The file's (decompressed) bytes, and the counter of bytes read from disk."""
    counter = _Counting(open(path, "rb"))  # noqa: SIM115 - closed by the caller through the stream
    buffered = io.BufferedReader(counter, buffer_size=1024 * 1024)
    if path.suffix.lower() == ".gz":
        return _OwnGzip(buffered), counter  # type: ignore[return-value]
    return buffered, counter


class _LineBound(io.RawIOBase):
    """The bytes of ``stream`` (decompressed), refused with :class:`ImportFailed` once more than
    :data:`LINE_BYTES` of them pass without a line break (LF or CR).  Checked a block at a time,
    by two searches in C, so an ordinary file pays nothing it would notice."""

    def __init__(self, stream: IO[bytes], name: str) -> None:
        self._stream = stream
        self._name = name
        self._run = 0  # bytes since the last line break

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._stream.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        first = min((i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0), default=-1)
        if first < 0:
            self._run += n
        else:
            if self._run + first > LINE_BYTES:
                self._run += first
            else:
                self._run = n - 1 - max(data.rfind(b"\n"), data.rfind(b"\r"))
        if self._run > LINE_BYTES:
            raise ImportFailed(
                f"{self._name} has a line of more than {LINE_BYTES // 2**20} MB with no line break; "
                "that is not a table this import reads."
            )
        return n

    def close(self) -> None:
        self._stream.close()
        super().close()


def bounded(stream: IO[bytes], name: str) -> IO[bytes]:
    """``stream`` read through :class:`_LineBound` (see there)."""
    return io.BufferedReader(_LineBound(stream, name), buffer_size=1024 * 1024)


def bounded_lines(stream: IO[bytes], name: str) -> Iterator[bytes]:
    """The lines of ``stream``, none longer than :data:`LINE_BYTES` (a longer one is refused before
    it is held whole)."""
    for line in iter(functools.partial(stream.readline, LINE_BYTES + 1), b""):
        if len(line) > LINE_BYTES:
            raise ImportFailed(
                f"{name} has a line of more than {LINE_BYTES // 2**20} MB; that is not a row this "
                "import reads."
            )
        yield line


def stream_error(exc: BaseException) -> str:
    """What went wrong reading a (compressed) file, in words: a cut ``.gz``, damaged data."""
    if isinstance(exc, EOFError):
        return "the file ends early (cut short while it was written or copied?)"
    if isinstance(exc, gzip.BadGzipFile | zlib.error):
        return f"its compressed data is damaged ({exc})"
    if isinstance(exc, UnicodeDecodeError):
        return f"bytes that are not {exc.encoding} text at byte {exc.start:,}"
    return str(exc) or type(exc).__name__


def csv_error(name: str, line: object, exc: csv.Error) -> ImportFailed:
    """The message for an error of the csv module (a field past :data:`FIELD_CHARS`, a NUL)."""
    if "field larger than field limit" in str(exc):
        return ImportFailed(
            f"{name} line {line}: a field of more than {FIELD_CHARS // 2**20} MB of text (an opening "
            "quote never closed?); that is not a cell this import reads."
        )
    return ImportFailed(f"{name} line {line}: {exc}")


def read_sample(path: Path) -> bytes:
    stream, _ = open_bytes(path)
    try:
        return stream.read(SAMPLE_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise ImportFailed(f"{path.name} cannot be read: {stream_error(exc)}") from exc
    finally:
        stream.close()


def refuse_binary(sample: bytes, name: str) -> None:
    """Raise for a file that is not text at all, whatever its name says."""
    for magic, what in _MAGIC.items():
        if sample.startswith(magic):
            raise ImportFailed(f"{name} is not a text file: it is {what}.")
    if sample[8:12] == b"DUCK":
        raise ImportFailed(f"{name} is not a text file: it is a DuckDB database.")
    if _utf16_bom_or_pattern(sample) is not None:
        return
    controls = sum(1 for b in sample[:4096] if b < 9 or 13 < b < 32 or b == 127)
    if len(sample) >= 64 and controls > len(sample[:4096]) * 0.1:
        raise ImportFailed(f"{name} is not a text file (it holds binary data).")


def _utf16_bom_or_pattern(sample: bytes) -> str | None:
    if sample.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32"
    if sample.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    head = sample[:2000]
    if len(head) >= 8:
        if head[1::2].count(0) > len(head) * 0.4 and head[0::2].count(0) == 0:
            return "utf-16-le"
        if head[0::2].count(0) > len(head) * 0.4 and head[1::2].count(0) == 0:
            return "utf-16-be"
    return None


def detect_encoding(sample: bytes) -> str:
    """The codec to read a file whose first bytes are ``sample`` (see the module's docstring)."""
    if sample.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    wide = _utf16_bom_or_pattern(sample)
    if wide is not None:
        return wide
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
        return "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes  # only for the files that are not UTF-8

    best = from_bytes(sample).best()
    guess = codecs.lookup(best.encoding).name if best is not None else "cp1252"
    if len(sample) < 4096 or guess not in _OTHER_SCRIPTS:
        # The detector is trusted for the scripts cp1252 cannot write; between the Latin code pages
        # it guesses from letter frequencies, and spreadsheet exports are overwhelmingly cp1252.
        guess = "cp1252"
    try:
        sample.decode(guess)
    except UnicodeDecodeError:
        return "latin-1"
    return guess


def sniff_delimiter(text: str, suffix: str) -> str | None:
    """The delimiter that cuts the sample's lines into the same number (>1) of fields most often;
    None when none cuts them into two or more."""
    if suffix in (".tsv", ".tab"):
        return "\t"
    lines = text.splitlines(keepends=True)
    if len(lines) > 1:
        lines = lines[:-1]  # the sample's last line may be cut in the middle
    head = "".join(lines[:200])
    best: str | None = None
    best_score = -1.0
    for delimiter in DELIMITERS:
        try:
            counts = [len(r) for r in csv.reader(io.StringIO(head, newline=""), delimiter=delimiter) if r]
        except csv.Error:
            continue
        if not counts:
            continue
        common = max(set(counts), key=counts.count)
        if common < 2:
            continue
        score = counts.count(common) / len(counts) + min(common, 50) / 1000
        if score > best_score + 1e-9:
            best, best_score = delimiter, score
    return best


# What a table read as Latin-1 after its own codec failed part-way says (both import paths).
MIXED_ENCODING_NOTE = "not in one consistent encoding: read as Latin-1, every byte kept"


@dataclass
class Layout:
    """How a delimited text file reads, found from its first bytes and rows: the codec, the
    delimiter, the rows above the header (blank lines and titles), the header, the data rows among
    the first ones read, and the notes a person should see (codec, delimiter, skipped lines)."""

    codec: str
    delimiter: str
    skipped: list[list[str]]
    header: list[str]
    first_rows: list[list[str]]
    notes: list[str]


def _open_layout(path: Path, encoding: str | None) -> tuple[Layout, Iterator[list[str]], IO[str], _Counting]:
    """The file's :class:`Layout`, with the open reader positioned after its first rows."""
    sample = read_sample(path)
    if not sample.strip():
        raise ImportFailed(f"{path.name} is empty: there is no header and no row to import.")
    refuse_binary(sample, path.name)
    codec = encoding or detect_encoding(sample)
    text_sample = sample.decode(codec, errors="replace")
    suffix = _inner_suffix(path)
    sniffed = sniff_delimiter(text_sample, suffix)
    if sniffed is None and suffix == ".txt":
        # A .txt is a table only when its lines split into columns; prose is not one (a .csv of a
        # single column is, so it keeps the comma).
        raise ImportFailed(
            f"{path.name} is plain text with no column delimiter (, ; tab |): "
            "not a SQLite database, and not a table to import."
        )
    delimiter = sniffed or ","
    stream, counter = open_bytes(path)
    text = io.TextIOWrapper(bounded(stream, path.name), encoding=codec, newline="", errors="strict")
    reader = csv.reader(text, delimiter=delimiter)
    notes = [] if codec in ("utf-8", "utf-8-sig") else [f"read as {codec}"]
    try:
        first = _leading_rows(reader)
    except csv.Error as exc:
        text.close()
        raise csv_error(path.name, reader.line_num, exc) from exc
    except (EOFError, OSError, zlib.error) as exc:
        text.close()
        raise ImportFailed(f"{path.name} line {reader.line_num + 1}: {stream_error(exc)}") from exc
    except BaseException:
        text.close()
        raise
    skipped, header, rest = split_header(first)
    if header is None:
        text.close()
        raise ImportFailed(f"{path.name} is empty: there is no header and no row to import.")
    if skipped:
        notes.append(
            f"{len(skipped)} line(s) above the header skipped: "
            + " / ".join(" ".join(c for c in row if c)[:80] for row in skipped)
        )
    if delimiter != ",":
        notes.append("separated by " + {"\t": "tabs", ";": "semicolons", "|": "bars"}[delimiter])
    return Layout(codec, delimiter, skipped, list(header), rest, notes), reader, text, counter


def sniff(path: Path, encoding: str | None = None) -> Layout:
    """The :class:`Layout` of ``path`` (reads its first rows only); raises like :func:`read_csv`."""
    layout, _reader, text, _counter = _open_layout(path, encoding)
    text.close()
    return layout


def read_csv(path: Path, meter: Meter, name: str, batch_rows: int, encoding: str | None = None) -> TextTable:
    """The table in the delimited text file ``path``, in batches of ``batch_rows``; raises
    :class:`ImportFailed` for a file with no header, or that is not text."""
    layout, reader, text, counter = _open_layout(path, encoding)
    table = TextTable(
        name, list(layout.header), iter(()), decimal_comma=layout.delimiter == ";", notes=list(layout.notes)
    )
    table.batches = _batches(layout.first_rows, reader, text, counter, meter, path.name, table, batch_rows)
    return table


def _inner_suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def _leading_rows(reader: Iterator[list[str]], n: int = 20) -> list[list[str]]:
    rows: list[list[str]] = []
    for row in reader:
        rows.append(row)
        if len(rows) >= n:
            break
    return rows


def split_header(rows: list[list[str]]) -> tuple[list[list[str]], list[str] | None, list[list[str]]]:
    """(rows above the header, the header, the data rows among ``rows``).

    Exports from portals put a blank line or a title above the header (data.gov's ``,,,,`` then
    ``Number of Beneficiaries…,,,``): a leading row is skipped when it has fewer than half as many
    filled cells as the fullest of the first rows.
    """
    filled = [sum(1 for c in r if c.strip()) for r in rows]
    if not any(filled):
        return [], None, []
    most = max(filled)
    for index, count in enumerate(filled):
        if count and count * 2 >= most:
            return rows[:index], rows[index], rows[index + 1 :]
    return [], None, []


def _batches(
    first: list[list[str]],
    reader: Iterator[list[str]],
    text: IO[str],
    counter: _Counting,
    meter: Meter,
    file_name: str,
    table: TextTable,
    batch_rows: int,
) -> Iterator[list[list[str | None]]]:
    long_rows = 0
    try:
        pending: list[list[str]] = list(first)
        width = len(table.headers)
        while True:
            # Per-row work in Python is what limits the speed, so there is none: the rows are taken
            # with islice(), blank lines (empty lists) dropped with filter() and the widest row found
            # with map(), all of which loop in C.
            pending.extend(itertools.islice(reader, max(0, batch_rows - len(pending))))
            if not pending:
                break
            batch: list[list[str | None]] = list(filter(None, pending))  # type: ignore[arg-type]
            pending = []
            longest = max(map(len, batch), default=0)
            if longest > width:
                long_rows += sum(1 for r in batch if len(r) > width)
                table.headers.extend("" for _ in range(longest - width))
                width = longest
            yield batch
            meter.count(len(batch), counter.count)
    except csv.Error as exc:
        raise csv_error(file_name, getattr(reader, "line_num", "?"), exc) from exc
    except (EOFError, OSError, zlib.error) as exc:
        line = getattr(reader, "line_num", 0) + 1
        raise ImportFailed(f"{file_name} line {line:,}: {stream_error(exc)}") from exc
    finally:
        text.close()
    if long_rows:
        table.notes.append(
            f"{long_rows:,} row(s) had more fields than the header: the extra fields are in the last columns"
        )


def file_size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
