"""The bounded GGUF header scanner: metadata values and the tensor list, never the weights.

The ``gguf`` package's ``GGUFReader`` builds a numpy view for every element of every array, so a
real model's 150k-string vocabulary takes it tens of seconds (5 s for SmolLM2's 49k on this
machine), and a hostile header sends it into RecursionError (arrays nested 20,000 deep),
IndexError or MemoryError (a count of 10^12).  The scan below reads the few values asked for,
skips arrays by their lengths without recursing, and checks every count against the bytes left
in the file before reading it (the format is the ``gguf`` package's: ``gguf.GGUFValueType`` ids),
a fraction of a second for any model; any malformed header is a :class:`GgufUnreadable`.

A leaf: the model catalog's checks (``core.models.gguf_info``), the engine's GPU layer plan
(``core.engines.llama.offload``) and an evaluation's record of the weights all read headers
through it, and it depends on nothing in the package but the error model.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqale_desktop.core.errors import KnownError


class GgufUnreadable(KnownError):
    """The file is not a GGUF the reader understands (message for people)."""


_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
# The fewest bytes one value of a kind takes in the file: a count read from the header is checked
# against the bytes left before anything is read or allocated for it.
_MIN_BYTES = {**{kind: struct.calcsize(fmt) for kind, fmt in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}
MAX_TENSOR_DIMS = 4  # GGML_MAX_DIMS: llama.cpp refuses a tensor with more


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's entry in the header: its name, shape and ggml type id."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int


@dataclass(frozen=True)
class GgufHeader:
    """The metadata values that were asked for (scalars, strings, arrays of scalars) and the tensors."""

    metadata: dict[str, Any]
    tensors: list[TensorInfo]


class _Scanner:
    """Sequential reads over the file's bytes (memory-mapped), every count bounded by the bytes left.

    Nothing recurses (arrays of arrays are skipped with an explicit stack) and nothing is allocated
    for a count before it is known to fit in the file, so a hostile header ends in ``ValueError``,
    never in ``RecursionError`` or ``MemoryError``.
    """

    def __init__(self, data: Any, order: str) -> None:
        self.data, self.order, self.pos = data, order, 0

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError("the header ends early")
        (value,) = struct.unpack_from(self.order + fmt, self.data, self.pos)
        self.pos += size
        return value

    def count(self, each: int) -> int:
        """A 64-bit count of items of at least ``each`` bytes, refused if they cannot fit."""
        value = int(self.unpack("Q"))
        if value * each > len(self.data) - self.pos:
            raise ValueError(f"a count of {value:,} runs past the end of the file")
        return value

    def string(self, keep: bool = True) -> str:
        length = self.count(1)
        start, self.pos = self.pos, self.pos + length
        return bytes(self.data[start : self.pos]).decode("utf-8", errors="replace") if keep else ""

    def value(self, kind: int, keep: bool) -> Any:
        """One metadata value; arrays are kept only when ``keep`` and of a scalar kind."""
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string(keep)
        if kind != _ARRAY:
            raise ValueError(f"unknown value type {kind}")
        item_kind = self.unpack("I")
        if item_kind not in _MIN_BYTES:
            raise ValueError(f"unknown array type {item_kind}")
        count = self.count(_MIN_BYTES[item_kind])
        if keep and item_kind in _SCALARS:
            fmt = _SCALARS[item_kind]
            values = list(struct.unpack_from(f"{self.order}{count}{fmt}", self.data, self.pos))
            self.pos += struct.calcsize(fmt) * count
            return values
        self._skip(item_kind, count)
        return None

    def _skip_strings(self, count: int) -> None:
        """Step over ``count`` strings: one length read each, in a tight loop (a vocabulary holds
        150k of them, a hostile file millions)."""
        data, pos, end = self.data, self.pos, len(self.data)
        length_at = struct.Struct(self.order + "Q").unpack_from
        for _ in range(count):
            if pos + 8 > end:
                raise ValueError("the header ends early")
            pos += 8 + length_at(data, pos)[0]
            if pos > end:
                raise ValueError("a string runs past the end of the file")
        self.pos = pos

    def _skip(self, kind: int, count: int) -> None:
        pending = [(kind, count)]
        while pending:
            kind, count = pending.pop()
            if kind in _SCALARS:
                self.pos += _MIN_BYTES[kind] * count  # within the file: checked by count()
            elif kind == _STRING:
                self._skip_strings(count)
            elif count:
                pending.append((kind, count - 1))
                item_kind = self.unpack("I")
                if item_kind not in _MIN_BYTES:
                    raise ValueError(f"unknown array type {item_kind}")
                pending.append((item_kind, self.count(_MIN_BYTES[item_kind])))


def read_header(path: Path, wanted: Callable[[str], bool], *, tensors: bool = False) -> GgufHeader:
    """The metadata values whose key ``wanted`` accepts, and (when ``tensors``) the tensor list.

    Every failure, whatever the bytes, is a :class:`GgufUnreadable` naming the file.
    """
    try:
        return _read_header(path, wanted, tensors)
    except (OSError, ValueError, struct.error, OverflowError, MemoryError) as exc:
        raise GgufUnreadable(f"{path.name} could not be read as a GGUF model: {exc}") from None


def _read_header(path: Path, wanted: Callable[[str], bool], with_tensors: bool) -> GgufHeader:
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if bytes(data[:4]) != b"GGUF":
            raise ValueError("no GGUF magic at the start")
        scanner = _Scanner(data, "<")
        scanner.pos = 4
        version = scanner.unpack("I")
        if not version & 0xFFFF:  # a byte-swapped version means a big-endian file
            scanner.order = ">"
            version = struct.unpack_from(">I", data, 4)[0]
        if version < 2:
            raise ValueError(f"GGUF version {version} is too old")
        tensor_count = int(scanner.unpack("Q"))
        metadata_count = scanner.count(8 + 4 + 1)  # a key's length, a type, a value's first byte
        # each tensor entry: a name's length, the dimension count, the type and the offset
        if tensor_count * (8 + 4 + 4 + 8) > len(data):
            raise ValueError(f"a count of {tensor_count:,} tensors runs past the end of the file")
        found: dict[str, Any] = {}
        for _ in range(metadata_count):
            key = scanner.string()
            keep = wanted(key)
            value = scanner.value(scanner.unpack("I"), keep)
            if keep:
                found[key] = value
        tensors: list[TensorInfo] = []
        for _ in range(tensor_count if with_tensors else 0):
            name = scanner.string()
            dims = scanner.unpack("I")
            if dims > MAX_TENSOR_DIMS:
                raise ValueError(f"tensor {name!r} has {dims} dimensions")
            shape = tuple(int(scanner.unpack("Q")) for _ in range(dims))
            tensors.append(TensorInfo(name, shape, int(scanner.unpack("I"))))
            scanner.unpack("Q")  # the data offset
        return GgufHeader(found, tensors)


@dataclass(frozen=True)
class ModelFacts:
    """What a run report records of the weights: their parameter count and file type."""

    parameters: int
    file_type: int | None
    """``general.file_type`` (a ``gguf.LlamaFileType`` value), None when the header has none."""


def read_model_facts(path: Path) -> ModelFacts:
    """The parameter count (every tensor's elements) and file type of the GGUF ``path``, through
    the bounded scanner: the ``gguf`` package's reader took 88-91 s and 4.8 GB on a 24 MB header
    of 3 million empty strings.  Raises :class:`GgufUnreadable`."""
    header = read_header(path, lambda key: key == "general.file_type", tensors=True)
    parameters = 0
    for tensor in header.tensors:
        elements = 1
        for size in tensor.shape:
            elements *= size
        parameters += elements
    file_type = header.metadata.get("general.file_type")
    return ModelFacts(parameters, int(file_type) if isinstance(file_type, int) else None)
