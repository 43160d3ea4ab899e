"""The evaluated system turn on disk, so the next launch restores it instead of evaluating it.

Every episode starts with the same system turn (a thousand tokens or more: tens of seconds of
prefill on two cores), and :class:`~sqale_desktop.core.engines.llama.memory.Memory` already keeps
the sequence state right after it in memory.  This module keeps that state (the bytes of
``llama_state_seq_get_data`` for sequence 0) in the app's cache folder, one file per key, so
restoring it at the next launch is a file read and one ``llama_state_seq_set_data`` call.

A state is only valid for the exact computation that produced it, so the key
(:func:`state_key`) is a sha256 over everything that computation depended on: the model file's
content hash (:meth:`PrefixStore.model_digest`), the system turn's token ids, the backends and
device that computed it, the GPU layers, the context and batch sizes, flash attention,
recurrent-snapshot slots and the llama-cpp-python version.  The key and the ids are stored in the
file too and compared on load; a file whose key, ids, length or checksum does not match is never
restored: it is deleted and the turn evaluated again (the caller notes why).

Writes go to a temporary file in the same folder and are renamed into place (``os.replace``),
so a reader never sees half a file; a ``filelock`` serialises writers and eviction between
processes (two windows, a window and ``ask``).

Bounded: at most :data:`MAX_ENTRIES` files and :data:`MAX_BYTES` in all, least recently used
(file modification time, touched on every restore) evicted first.  A person normally has one
model and one protocol, so one entry is the steady state; four covers switching between a few
models or settings (GPU on/off, another context size) without each switch evaluating again, and
the byte cap keeps a 2B model's states (tens of MB each) from growing without bound.

``SQALE_DESKTOP_NO_STATE_CACHE=1`` turns the store off (benchmarks measuring a cold prefill).
Qt-free, and it never imports ``llama_cpp``: the caller hands in the bytes and the facts.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import struct
import tempfile
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock

from sqale_desktop.core import file_hash, paths
from sqale_desktop.core.units import MIB

DISABLE_ENV = "SQALE_DESKTOP_NO_STATE_CACHE"
FOLDER = "llama-state"
THREADS_FOLDER = "llama-threads"
"""Finished threads' states, for a follow-up after a relaunch: a folder (and bounds) of their own,
so saving answers never evicts the system turn every launch restores."""
THREAD_ENTRIES = 3
THREAD_BYTES = 512 * MIB
SUFFIX = ".state"
MAX_ENTRIES = 4
MAX_BYTES = 1024 * MIB
FORMAT_VERSION = 1
_MAGIC = b"SQALEST1"
# magic, format version, header length, state length, crc32 of the state.
_FIXED = struct.Struct("<8sIIQI")
_HASHES = "model-hashes.json"
_LOCK_TIMEOUT_S = 30.0


def disabled() -> bool:
    """Whether ``SQALE_DESKTOP_NO_STATE_CACHE`` turns the store off."""
    return os.environ.get(DISABLE_ENV, "").strip().lower() not in ("", "0", "false", "no")


@dataclass(frozen=True)
class Loaded:
    """What :meth:`PrefixStore.load` found: the state (ctypes bytes) or why there is none.

    ``state`` None and ``problem`` empty: no file for this key (nothing to say).  ``problem``: a
    file was there but could not be used (it has been deleted); the sentence says why.
    """

    state: Any
    problem: str = ""
    path: Path | None = None
    tokens: tuple[int, ...] = ()
    """The ids the state was saved after (what ``load`` compared, or found when asked for any)."""
    fields: dict[str, Any] | None = None
    """The fields saved with the state (a thread's whole history rides here)."""


def state_key(fields: dict[str, object], tokens: Sequence[int]) -> str:
    """sha256 (hex) over ``fields`` (JSON, keys sorted) and the token ids."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"format": FORMAT_VERSION, **fields}, sort_keys=True).encode())
    digest.update(b"\0")
    digest.update(struct.pack(f"<{len(tokens)}i", *tokens))
    return digest.hexdigest()


class PrefixStore:
    """One folder of saved sequence states, keyed by :func:`state_key`."""

    def __init__(
        self, folder: Path | None = None, *, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES
    ) -> None:
        self.folder = folder if folder is not None else paths.cache_dir() / FOLDER
        self.max_entries = max(1, max_entries)
        self.max_bytes = max_bytes

    def path_for(self, key: str) -> Path:
        return self.folder / f"{key[:40]}{SUFFIX}"

    def entries(self) -> list[Path]:
        """The stored states, least recently used first."""
        try:
            found = [p for p in self.folder.iterdir() if p.suffix == SUFFIX and p.is_file()]
        except OSError:
            return []
        return sorted(found, key=_mtime)

    # -- reading -------------------------------------------------------------------------------

    def load(self, key: str, tokens: Sequence[int] | None) -> Loaded:
        """The state saved under ``key`` for exactly ``tokens`` (None: whatever ids it was saved
        after, which ``Loaded.tokens`` gives); a bad file is deleted and said so."""
        path = self.path_for(key)
        try:
            stream = path.open("rb")
        except FileNotFoundError:
            return Loaded(None)
        except OSError as exc:
            return Loaded(None, f"could not read {path.name}: {exc.strerror or exc}", path)
        with stream:
            problem, state, header = _read(stream, key, tokens, os.fstat(stream.fileno()).st_size)
        if problem:
            self.discard(path)
            return Loaded(None, f"{path.name} {problem}; deleted", path)
        with contextlib.suppress(OSError):
            os.utime(path)  # most recently used
        fields = header.get("fields")
        return Loaded(state, "", path, tuple(header["tokens"]), fields if isinstance(fields, dict) else None)

    def discard(self, path: Path) -> None:
        with contextlib.suppress(OSError):
            path.unlink()

    # -- writing -------------------------------------------------------------------------------

    def save(self, key: str, tokens: Sequence[int], state: Any, fields: dict[str, object]) -> Path | None:
        """Write ``state`` (bytes-like) under ``key``, atomically; then evict down to the bounds.

        Returns the path, or None when it could not be written (a full disk, a read-only cache:
        the turn is simply evaluated at the next launch too).  A state larger than the byte cap
        is not written at all.
        """
        body = memoryview(state).cast("B")
        header = json.dumps({"key": key, "tokens": list(tokens), "fields": fields}).encode()
        if _FIXED.size + len(header) + body.nbytes > self.max_bytes:
            return None
        path = self.path_for(key)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with self._lock():
                fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=".writing-", suffix=".tmp")
                try:
                    with os.fdopen(fd, "wb") as out:
                        out.write(
                            _FIXED.pack(_MAGIC, FORMAT_VERSION, len(header), body.nbytes, zlib.crc32(body))
                        )
                        out.write(header)
                        out.write(body)
                    os.replace(temporary, path)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(temporary)
                    raise
                self._evict(keep=path)
        except (OSError, filelock.Timeout):
            return None
        return path

    def _evict(self, keep: Path) -> None:
        """Delete least recently used entries beyond the count and byte bounds (never ``keep``)."""
        entries = self.entries()
        sizes = {p: _size(p) for p in entries}
        total = sum(sizes.values())
        for path in list(entries):
            if len(entries) <= self.max_entries and total <= self.max_bytes:
                break
            if path == keep:
                continue
            self.discard(path)
            entries.remove(path)
            total -= sizes[path]

    def _lock(self) -> filelock.BaseFileLock:
        return filelock.FileLock(str(self.folder / ".lock"), timeout=_LOCK_TIMEOUT_S)

    # -- the model file's content hash ---------------------------------------------------------

    def model_digest(self, model: Path, cancel: threading.Event | None = None, known: str = "") -> str:
        """The sha256 of ``model``'s content, hashed at most once per version of the file.

        A version is the file's (path, size, mtime, inode, ctime): a person can put a replaced
        file's size and mtime back, but a replacement (a copy over it, a rename onto it) changes
        its ctime or inode, and nobody can set a ctime.  ``known`` is the model registry's hash
        (the runtime hands it over; the registry compares only size and mtime): it is taken
        without reading the file the first time this path is seen; a later version of the path is
        hashed, since a same-size copy with its mtime put back passes the registry's check too.
        Results are kept in ``model-hashes.json`` here.  Raises ``OSError`` when the file cannot be
        read, ``Cancelled`` when ``cancel`` is set meanwhile.
        """
        info = model.stat()
        resolved = str(model.resolve())
        version = f"{resolved}|{info.st_size}|{info.st_mtime_ns}|{info.st_ino}|{info.st_ctime_ns}"
        hashes = self._read_hashes()
        cached = hashes.get(version)
        if isinstance(cached, str) and cached:
            return cached
        seen = any(k.startswith(resolved + "|") for k in hashes)
        digest = known if known and not seen else file_hash.sha256_file(model, cancel=cancel)
        # Only current entries of other files are kept, so the file does not grow.
        hashes = {k: v for k, v in self._read_hashes().items() if not k.startswith(resolved + "|")}
        hashes[version] = digest
        with contextlib.suppress(OSError, filelock.Timeout):
            self.folder.mkdir(parents=True, exist_ok=True)
            with self._lock():
                fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=".writing-", suffix=".tmp")
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(dict(list(hashes.items())[-32:]), out)
                os.replace(temporary, self.folder / _HASHES)
        return digest

    def _read_hashes(self) -> dict[str, object]:
        try:
            data = json.loads((self.folder / _HASHES).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


def _read(stream: Any, key: str, tokens: Sequence[int] | None, size: int) -> tuple[str, Any, dict[str, Any]]:
    """(problem, state, header): the state read into a ctypes buffer, or what is wrong with the file."""
    fixed = stream.read(_FIXED.size)
    if len(fixed) < _FIXED.size:
        return f"is truncated ({size} bytes)", None, {}
    magic, version, header_len, state_len, crc = _FIXED.unpack(fixed)
    if magic != _MAGIC or version != FORMAT_VERSION:
        return "is not a saved state of this version", None, {}
    expected = _FIXED.size + header_len + state_len
    if size != expected:
        return f"is truncated or damaged ({size:,} bytes, expected {expected:,})", None, {}
    try:
        header = json.loads(stream.read(header_len).decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return "has an unreadable header", None, {}
    if not isinstance(header, dict) or header.get("key") != key:
        return "was saved for another model, backend or system prompt", None, {}
    saved = header.get("tokens")
    if not isinstance(saved, list) or not all(isinstance(t, int) for t in saved):
        return "has unreadable token ids", None, {}
    if tokens is not None and saved != list(tokens):
        return "holds other token ids than this system turn", None, {}
    state = (ctypes.c_uint8 * state_len)()
    if stream.readinto(memoryview(state).cast("B")) != state_len:
        return "is truncated", None, {}
    if zlib.crc32(memoryview(state).cast("B")) != crc:
        return "is damaged (checksum mismatch)", None, {}
    return "", state, header


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
