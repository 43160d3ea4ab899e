"""The local registry of models the app may load: a JSON file under ``paths.data_dir()``.

A model is registered only after its file is complete and verified (a hub download's sha256
matched the hub's; an imported file has the GGUF magic), so anything in the registry can be
loaded without touching the network.  The file is small and rewritten atomically; a process-wide
lock guards read-modify-write between threads (the UI's download worker and its main thread),
and a lock file (``models.json.lock``, through ``filelock``) between processes (two ``models
import`` at once, the window and the CLI), so no writer can lose another's entry.

A registered file can still change on disk after registration (re-downloaded by another tool,
truncated, edited).  ``usable`` compares its size and modification time with the record and
re-hashes it when they differ, refusing a file whose content no longer matches.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import filelock

from sqale_desktop.core import json_input, paths
from sqale_desktop.core.models.errors import InvalidModelFile, ModelError, UnknownModel
from sqale_desktop.core.models.files import HashProgress, require_gguf, sha256_file
from sqale_desktop.core.models.gguf_info import GgufUnreadable, read_gguf_info

REGISTRY_FILE = "models.json"
_LOCK = threading.RLock()
"""One lock for every Registry in the process: the UI, a download worker and a conversion worker
may each hold their own instance of the same file."""
REGISTRY_VERSION = 1
LOCK_TIMEOUT_S = 30.0  # another process's registry write takes milliseconds; 30 s means it hangs

Origin = Literal["hub", "import", "convert"]


@dataclass(frozen=True)
class ModelRecord:
    """One registered model file.

    ``repo``/``revision`` are empty for imports.  ``source_checkpoint`` is the SQaLe checkpoint
    the GGUF was built from (it picks the catalog entry and the extras); ``extras`` maps a file
    name (``sqale_agent.py``, ``generation_config.json``) to its local path.
    """

    id: str
    path: str
    sha256: str
    size: int
    origin: Origin
    repo: str = ""
    file: str = ""
    revision: str = ""
    source_checkpoint: str = ""
    extras: dict[str, str] = field(default_factory=dict)
    added_at: float = 0.0
    # The file's st_mtime when it was registered (or last re-verified); 0 in older registries.
    mtime: float = 0.0

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def model_dir(self) -> Path:
        """The folder to read ``sqale_agent.py`` / ``generation_config.json`` from
        (``agent.protocol.load_protocol``): where the fetched extras lie (the checkpoint's
        snapshot in the hub cache), else the GGUF's own folder."""
        if self.extras:
            return Path(next(iter(self.extras.values()))).parent
        return Path(self.path).parent


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of re-hashing a registered file."""

    record: ModelRecord
    ok: bool
    message: str


def registry_path() -> Path:
    return paths.data_dir() / REGISTRY_FILE


def slug_for(file_name: str) -> str:
    """A short, typeable id from a file name: ``Qwen3.5-2B-Q4_K_M.gguf`` -> ``qwen3.5-2b-q4_k_m``."""
    stem = Path(file_name).name
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    slug = re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).strip("-.")
    return slug or "model"


class Registry:
    """Registered models, persisted to ``models.json`` (``path`` overrides it for tests)."""

    def __init__(self, path: Path | None = None) -> None:
        self._path = path or registry_path()
        self._lock = _LOCK

    @property
    def path(self) -> Path:
        return self._path

    def list(self) -> list[ModelRecord]:
        """All records, oldest first."""
        with self._lock:
            return sorted(self._read().values(), key=lambda r: (r.added_at, r.id))

    def get(self, model_id: str) -> ModelRecord:
        with self._lock:
            record = self._read().get(model_id)
        if record is None:
            raise UnknownModel(f"No registered model with id {model_id!r} (see: sqale-desktop models list).")
        return record

    def find(self, model_id: str) -> ModelRecord | None:
        with self._lock:
            return self._read().get(model_id)

    def usable(self, preferred_id: str | None = None) -> ModelRecord | None:
        """The model to load: ``preferred_id`` (the settings' choice) when its file is there, else
        the oldest registered model whose file is there; None when there is none.

        The chosen file is checked (``check_unchanged``): a file modified since it was registered
        raises ``ModelChanged`` rather than being loaded.
        """
        record: ModelRecord | None = None
        if preferred_id:
            found = self.find(preferred_id)
            if found is not None and Path(found.path).is_file():
                record = found
        if record is None:
            record = next((r for r in self.list() if Path(r.path).is_file()), None)
        return self.check_unchanged(record) if record is not None else None

    def check_unchanged(self, record: ModelRecord, progress: HashProgress | None = None) -> ModelRecord:
        """``record`` if its file is still the one registered; raise ``ModelChanged`` if not.

        Size and modification time are compared first (free); only when they differ (or the
        record predates modification times) is the file hashed again.  A file whose hash still
        matches gets its new modification time recorded, so it is hashed once, not every time.
        """
        file_path = Path(record.path)
        try:
            info = file_path.stat()
        except OSError as exc:
            raise ModelChanged(f"Model {record.id}: cannot read {file_path}: {exc.strerror or exc}") from None
        if info.st_size == record.size and record.mtime and info.st_mtime == record.mtime:
            return record
        if info.st_size != record.size:
            raise ModelChanged(
                _changed_message(record, f"its size is now {info.st_size:,} bytes, not {record.size:,}")
            )
        actual = sha256_file(file_path, progress)
        if actual != record.sha256:
            raise ModelChanged(_changed_message(record, f"its sha256 is now {actual}"))
        updated = dataclasses.replace(record, mtime=info.st_mtime)
        with self._writing():
            records = self._read()
            if records.get(record.id, None) is not None and records[record.id].sha256 == record.sha256:
                records[record.id] = updated
                self._write(records)
        return updated

    def find_by_path(self, path: Path) -> ModelRecord | None:
        """The record for this file, if it is already registered (imports are idempotent)."""
        wanted = str(path.resolve())
        with self._lock:
            return next((r for r in self._read().values() if r.path == wanted), None)

    def add(self, record: ModelRecord) -> ModelRecord:
        """Register ``record``; its id is made unique (``-2``, ``-3``…) if already taken."""
        if not record.mtime:
            # the file was just verified (hashed or fetched): this is the state it is trusted in
            with suppress(OSError):
                record = dataclasses.replace(record, mtime=Path(record.path).stat().st_mtime)
        with self._writing():
            records = self._read()
            existing = next(
                (r for r in records.values() if r.path == record.path and r.sha256 == record.sha256), None
            )
            if existing is not None:
                record = dataclasses.replace(record, id=existing.id, added_at=existing.added_at)
            else:
                record = dataclasses.replace(
                    record,
                    id=self._unique_id(record.id, records),
                    added_at=record.added_at or time.time(),
                )
            records[record.id] = record
            self._write(records)
            return record

    def remove(self, model_id: str) -> ModelRecord:
        """Forget a model.  The file stays where it is (it may be shared with other tools)."""
        with self._writing():
            records = self._read()
            if model_id not in records:
                raise UnknownModel(f"No registered model with id {model_id!r}.")
            record = records.pop(model_id)
            self._write(records)
            return record

    def import_file(
        self, path: Path, source_checkpoint: str = "", progress: HashProgress | None = None
    ) -> ModelRecord:
        """Register a local GGUF file where it lies (validated by its magic, hashed once)."""
        resolved = path.expanduser().resolve()
        require_gguf(resolved)
        try:
            read_gguf_info(resolved)  # the whole header, not just the magic: what loading reads first
        except GgufUnreadable as exc:
            raise InvalidModelFile(str(exc)) from None
        known = self.find_by_path(resolved)
        sha = sha256_file(resolved, progress)
        if known is not None and known.sha256 == sha:
            return known
        record = ModelRecord(
            id=slug_for(resolved.name),
            path=str(resolved),
            sha256=sha,
            size=resolved.stat().st_size,
            origin="import",
            source_checkpoint=source_checkpoint,
        )
        return self.add(record)

    def verify(self, model_id: str, progress: HashProgress | None = None) -> VerifyResult:
        """Re-hash the file and compare with the registered sha256 (the file may have rotted)."""
        record = self.get(model_id)
        file_path = Path(record.path)
        if not file_path.is_file():
            return VerifyResult(record, False, f"The file is missing: {file_path}")
        try:
            require_gguf(file_path)
        except InvalidModelFile as exc:
            return VerifyResult(record, False, str(exc))
        actual = sha256_file(file_path, progress)
        if actual != record.sha256:
            return VerifyResult(
                record,
                False,
                f"Checksum mismatch: expected {record.sha256}, found {actual}. Download it again.",
            )
        return VerifyResult(record, True, f"OK: sha256 {actual}")

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold both locks for one read-modify-write: the threads' lock, then the processes' one."""
        with self._lock:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            lock = filelock.FileLock(f"{self._path}.lock", timeout=LOCK_TIMEOUT_S)
            try:
                lock.acquire()
            except filelock.Timeout:
                raise ModelError(
                    f"The model registry {self._path} stayed locked by another sqale-desktop process "
                    f"for {LOCK_TIMEOUT_S:g} s; try again when it has finished."
                ) from None
            try:
                yield
            finally:
                lock.release()

    def _unique_id(self, wanted: str, records: dict[str, ModelRecord]) -> str:
        candidate, n = wanted, 2
        while candidate in records:
            candidate = f"{wanted}-{n}"
            n += 1
        return candidate

    def _read(self) -> dict[str, ModelRecord]:
        try:
            raw = self._path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            data = json_input.loads(raw)  # bad UTF-8 and deep nesting are a ValueError too
            items = data["models"]
            if not isinstance(items, list):
                raise ValueError("'models' is not a list")
            return {item["id"]: _record_from(item) for item in items}
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(
                f"The model registry {self._path} is damaged ({type(exc).__name__}: {exc}); "
                "move it aside and re-import your models."
            ) from None

    def _write(self, records: dict[str, ModelRecord]) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "version": REGISTRY_VERSION,
            "models": [dataclasses.asdict(r) for r in sorted(records.values(), key=lambda r: r.id)],
        }
        fd, tmp_name = tempfile.mkstemp(prefix=".models-", suffix=".json", dir=self._path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(payload, handle, indent=2)
                handle.write("\n")
            os.replace(tmp_name, self._path)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise


class ModelChanged(ModelError):
    """A registered file is no longer the file that was registered (another tool changed it)."""


def _changed_message(record: ModelRecord, what: str) -> str:
    return (
        f"Model {record.id} ({record.path}) was modified after it was registered: {what}. "
        f"It is not loaded; check it with: sqale-desktop models verify {record.id}, then download "
        "or import it again."
    )


def _record_from(item: dict[str, Any]) -> ModelRecord:
    """A record from its JSON object; ``ValueError`` naming the first field of the wrong type
    (a ``"size": "big"`` would otherwise be accepted and fail wherever the size is shown)."""
    if not isinstance(item, dict):
        raise ValueError("an entry is not a JSON object")
    values: dict[str, Any] = {}
    for f in dataclasses.fields(ModelRecord):
        if f.name not in item:
            continue
        value = item[f.name]
        if not _of_type(value, f.type):
            raise ValueError(f"entry {item.get('id')!r} has a bad {f.name}: {value!r:.40}")
        values[f.name] = value
    if values.get("origin") not in ("hub", "import", "convert"):
        raise ValueError(f"entry {item.get('id')!r} has a bad origin")
    return ModelRecord(**values)


def _of_type(value: Any, annotation: object) -> bool:
    """Whether a JSON value fits a ``ModelRecord`` field's annotation (written as text here)."""
    if isinstance(value, bool):
        return False
    if annotation in ("str", "Origin"):
        return isinstance(value, str)
    if annotation == "int":
        return isinstance(value, int)
    if annotation == "float":
        return isinstance(value, int | float)
    if annotation == "dict[str, str]":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    return False
