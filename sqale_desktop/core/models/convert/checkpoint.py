"""Read a safetensors checkpoint folder tensor by tensor, without torch and without loading it whole.

The published checkpoints are bfloat16, which numpy cannot represent and safetensors' numpy
backend therefore refuses to load.  The safetensors file format is a fixed, documented layout
(an 8-byte little-endian header length, a JSON header of dtypes, shapes and byte offsets, then
raw little-endian data), so each tensor is memory-mapped straight from the file: bfloat16 comes
back as its uint16 bit pattern, which the converter can reorder and write to the GGUF unchanged.
Memory-mapping keeps the resident set bounded by the tensor being converted, not the checkpoint.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sqale_desktop.core.models.convert.errors import UnsupportedCheckpoint

# Storage dtype of each safetensors dtype the converter accepts; BF16 is carried as raw bits.
_STORAGE: dict[str, np.dtype[Any]] = {
    "BF16": np.dtype("<u2"),
    "F16": np.dtype("<f2"),
    "F32": np.dtype("<f4"),
}
_HEADER_LIMIT = 100 * 1024 * 1024  # the format's own limit on the JSON header


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor lives: file, safetensors dtype, shape and absolute byte offset."""

    name: str
    file: Path
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


class Checkpoint:
    """A Hugging Face checkpoint folder: ``config.json`` plus one or more ``*.safetensors`` files."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        config_path = folder / "config.json"
        if not config_path.is_file():
            raise UnsupportedCheckpoint(f"{folder} has no config.json")
        self.config: dict[str, Any] = json.loads(config_path.read_text(encoding="utf-8"))
        files = _weight_files(folder)
        if not files:
            raise UnsupportedCheckpoint(f"{folder} has no .safetensors files")
        self._entries: dict[str, TensorEntry] = {}
        for file in files:
            for entry in _read_header(file):
                self._entries[entry.name] = entry

    def names(self) -> list[str]:
        """Every tensor name in the checkpoint, in file order."""
        return list(self._entries)

    def entry(self, name: str) -> TensorEntry:
        return self._entries[name]

    def read(self, name: str) -> npt.NDArray[Any]:
        """The tensor as a read-only memory map in its storage dtype (BF16 as uint16 bits)."""
        entry = self._entries[name]
        dtype = _STORAGE[entry.dtype]
        if entry.nbytes == 0:
            return np.zeros(entry.shape, dtype=dtype)
        return np.memmap(entry.file, dtype=dtype, mode="r", offset=entry.offset, shape=entry.shape)

    def read_rows(self, name: str, start: int, stop: int) -> npt.NDArray[Any]:
        """Rows ``start:stop`` of the first axis, read into a fresh buffer (not mapped).

        Used to stream large tensors: a memory map keeps every page it touched resident until it
        is closed, so a 1 GB embedding copied through one map would sit in memory whole.
        """
        entry = self._entries[name]
        dtype = _STORAGE[entry.dtype]
        row = int(np.prod(entry.shape[1:], dtype=np.int64))
        data = np.fromfile(
            entry.file,
            dtype=dtype,
            count=(stop - start) * row,
            offset=entry.offset + start * row * dtype.itemsize,
        )
        return data.reshape((stop - start, *entry.shape[1:]))

    def read_float32(self, name: str) -> npt.NDArray[np.float32]:
        """The tensor decoded to float32 (for the few small tensors whose values change)."""
        return to_float32(self.read(name), self._entries[name].dtype)


def to_float32(data: npt.NDArray[Any], dtype: str) -> npt.NDArray[np.float32]:
    """Decode storage values (BF16 bits, F16, F32) to float32."""
    if dtype == "BF16":
        return (np.asarray(data, dtype=np.uint32) << 16).view(np.float32)
    return np.asarray(data, dtype=np.float32)


def _weight_files(folder: Path) -> list[Path]:
    """The shards named by ``model.safetensors.index.json`` if there is one, else every file."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map: dict[str, str] = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        files = [folder / name for name in sorted(set(weight_map.values()))]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise UnsupportedCheckpoint(f"{folder} lacks {missing[0]} (listed in its safetensors index)")
        return files
    return sorted(folder.glob("*.safetensors"))


def _read_header(file: Path) -> list[TensorEntry]:
    with file.open("rb") as fh:
        raw_len = fh.read(8)
        if len(raw_len) != 8:
            raise UnsupportedCheckpoint(f"{file.name} is not a safetensors file (too short)")
        (header_len,) = struct.unpack("<Q", raw_len)
        if header_len > _HEADER_LIMIT:
            raise UnsupportedCheckpoint(f"{file.name} is not a safetensors file (header too large)")
        try:
            header = json.loads(fh.read(header_len))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UnsupportedCheckpoint(f"{file.name} has an unreadable safetensors header") from exc
    data_start = 8 + header_len
    size = file.stat().st_size
    entries = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _STORAGE:
            raise UnsupportedCheckpoint(
                f"tensor {name} has dtype {dtype}; only BF16, F16 and F32 are supported"
            )
        begin, end = info["data_offsets"]
        shape = tuple(int(d) for d in info["shape"])
        expected = int(np.prod(shape, dtype=np.int64)) * _STORAGE[dtype].itemsize
        if end - begin != expected or data_start + end > size:
            raise UnsupportedCheckpoint(f"tensor {name} in {file.name} is truncated or malformed")
        entries.append(TensorEntry(name, file, dtype, shape, data_start + begin, end - begin))
    return entries
