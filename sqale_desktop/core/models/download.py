"""Downloading a GGUF from the hub so that it survives real networks, then registering it.

Why not just ``hf_hub_download``: since huggingface_hub 1.x it writes to a temporary file unique
to the process and deletes it on any failure, so a download interrupted by a crash, a closed
laptop or a restart starts again from zero.  Here the transfer uses the library's HTTP session,
headers, URL building, metadata and error types, and the standard hub cache layout
(``hubcache``), but keeps its own partial file, so it can:

- resume with an HTTP ``Range`` request after a dropped connection or a restart;
- retry with exponential back-off, resetting the count whenever bytes arrive;
- detect a stall (no byte for ``stall_timeout_s``: the read timeout) and say so;
- report progress (bytes, speed, ETA) and stop when the ``cancel`` event is set (checked
  between chunks, so while the server is silent a cancel waits for the stall timeout at most);
- check free space first, and turn a full disk into a clear message with the partial removed;
- verify the sha256 the hub records before the file enters the cache or the registry.

The small extras (``sqale_agent.py``, ``generation_config.json``) go through ``hf_hub_download``.
"""

from __future__ import annotations

import errno
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sqale_desktop.core.models import hub, hubcache
from sqale_desktop.core.models.catalog import find as find_checkpoint
from sqale_desktop.core.models.errors import (
    ChecksumMismatch,
    DownloadCancelled,
    DownloadStalled,
    HubUnavailable,
    InvalidModelFile,
    ModelError,
    NotEnoughDiskSpace,
    NotFoundOnHub,
)
from sqale_desktop.core.models.files import DiskUsage, git_blob_sha1, require_gguf, sha256_file
from sqale_desktop.core.models.registry import ModelRecord, Registry, slug_for
from sqale_desktop.core.units import format_bytes

DownloadPhase = Literal["metadata", "download", "verify", "extras", "done"]


@dataclass(frozen=True)
class Progress:
    """One progress report.  ``stalled`` is set when the server stopped sending (a retry follows)."""

    phase: DownloadPhase
    done: int
    total: int
    speed_bps: float = 0.0
    eta_s: float | None = None
    stalled: bool = False
    message: str = ""


DownloadProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class DownloadOptions:
    """Knobs for the transfer; tests shrink the timeouts, the app keeps the defaults."""

    retries: int = 6
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    stall_timeout_s: float = 20.0
    connect_timeout_s: float = 15.0
    chunk_size: int = 1024 * 1024
    space_margin: int = 64 * 1024 * 1024
    disk_usage: DiskUsage = field(default=shutil.disk_usage)
    fetch_extras: bool = True


@dataclass(frozen=True)
class DownloadResult:
    """The registered model and anything the user should know (an extra that could not be fetched)."""

    record: ModelRecord
    notes: tuple[str, ...] = ()


class _Meter:
    """Speed over a sliding window of recent chunks (steadier than per-chunk rates); ETA from it."""

    WINDOW_S = 5.0

    def __init__(self, total: int, callback: DownloadProgressCallback | None) -> None:
        self.total = total
        self.callback = callback
        self.speed = 0.0
        self._samples: deque[tuple[float, int]] = deque()
        self._last_report = 0.0

    def chunk(self, done: int, size: int) -> None:
        now = time.monotonic()
        if not self._samples:  # restart() was not called: count from this chunk on
            self._samples.append((now, done))
            return
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[1][0] > self.WINDOW_S:
            self._samples.popleft()
        t0, d0 = self._samples[0]
        if now > t0:
            self.speed = (done - d0) / (now - t0)
        if self.callback is not None and (now - self._last_report >= 0.1 or done >= self.total):
            self._last_report = now
            eta = (self.total - done) / self.speed if self.speed > 0 else None
            self.callback(Progress("download", done, self.total, self.speed, eta))

    def restart(self, offset: int) -> None:
        """Start measuring at ``offset`` now: time spent reconnecting is not transfer speed."""
        self._samples.clear()
        self._samples.append((time.monotonic(), offset))

    def note(self, phase: DownloadPhase, done: int, message: str, stalled: bool = False) -> None:
        if self.callback is not None:
            self.callback(Progress(phase, done, self.total, self.speed, None, stalled, message))


def download_model(
    repo: str,
    file_name: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    source_checkpoint: str | None = None,
    registry: Registry | None = None,
    cache_dir: Path | None = None,
    progress: DownloadProgressCallback | None = None,
    cancel: threading.Event | None = None,
    options: DownloadOptions | None = None,
) -> DownloadResult:
    """Download ``file_name`` from ``repo`` into the hub cache, verify it, register it.

    Raises a ``ModelError`` subclass for every known condition (cancelled, stalled, checksum,
    disk full, token needed, hub unreachable); the partial file is kept for a later resume
    except after a checksum failure or a full disk.
    """
    if not file_name.lower().endswith(".gguf"):
        raise InvalidModelFile(
            f"{file_name} is not a GGUF file; the app loads GGUF models only. Safetensors "
            "checkpoints can be converted with 'sqale-desktop models convert'."
        )
    opts = options or DownloadOptions()
    cancel = cancel or threading.Event()
    registry = registry or Registry()
    cache = cache_dir or hubcache.default_cache_dir()
    if progress is not None:
        progress(Progress("metadata", 0, 0, message=f"Asking the hub about {repo}/{file_name}"))
    remote = hub.remote_file(repo, file_name, revision=revision, token=token)
    cpaths = hubcache.CachePaths.of(cache, repo, file_name, remote.commit, remote.etag)
    meter = _Meter(remote.size, progress)

    with _blob_lock(cpaths, remote):
        sha, path = _fetch_blob(remote, cpaths, revision, token, opts, cancel, meter)
    require_gguf(path)  # verified bytes, but of something llama.cpp cannot load: not registered

    checkpoint = _source_checkpoint(repo, source_checkpoint, token)
    extras: dict[str, str] = {}
    notes: list[str] = []
    if opts.fetch_extras and checkpoint:
        meter.note("extras", remote.size, f"Fetching {', '.join(hub.EXTRA_FILES)} from {checkpoint}")
        extras, notes = fetch_extras(checkpoint, token=token, cache_dir=cache)
    record = registry.add(
        ModelRecord(
            id=slug_for(file_name),
            path=str(path),
            sha256=sha,
            size=remote.size,
            origin="hub",
            repo=repo,
            file=file_name,
            revision=remote.commit,
            source_checkpoint=checkpoint,
            extras=extras,
        )
    )
    meter.note("done", remote.size, f"Registered as {record.id}")
    return DownloadResult(record, tuple(notes))


@contextmanager
def _blob_lock(cpaths: hubcache.CachePaths, remote: hub.RemoteFile) -> Iterator[None]:
    """Hold huggingface_hub's own lock on the blob: a second download (ours, in another window or
    process, or the library's) must not write the same partial file at the same time."""
    from filelock import FileLock, Timeout

    # The same lock file and kind (an OS lock, group-writable) as huggingface_hub's own, which it
    # keeps private (utils._fixes.WeakFileLock), so its downloads and ours still exclude each other.
    cpaths.lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(cpaths.lock, timeout=1.0, mode=0o664):
            yield
    except Timeout:
        raise ModelError(
            f"{remote.name} is already being downloaded by another window or program; "
            "wait for it to finish (or stop it) and try again."
        ) from None


def _fetch_blob(
    remote: hub.RemoteFile,
    cpaths: hubcache.CachePaths,
    revision: str | None,
    token: str | None,
    opts: DownloadOptions,
    cancel: threading.Event,
    meter: _Meter,
) -> tuple[str, Path]:
    """The verified file in the hub cache: reused when already there, else downloaded."""
    cached = hubcache.cached_file(cpaths)
    blob = hubcache.cached_blob(cpaths)
    if cached is not None:
        meter.note("verify", remote.size, "Already in the hub cache; verifying")
        return _verify(cached, remote, cancel, meter, delete_on_mismatch=False), cached
    if blob is not None:
        meter.note("verify", remote.size, "Same file already in the hub cache; verifying")
        sha = _verify(blob, remote, cancel, meter, delete_on_mismatch=False)
        return sha, hubcache.link(cpaths, revision, remote.commit)
    _check_space(cpaths, remote.size, opts)
    _transfer(remote, cpaths, token, opts, cancel, meter)
    meter.note("verify", remote.size, "Verifying the checksum")
    sha = _verify(cpaths.partial, remote, cancel, meter, delete_on_mismatch=True)
    return sha, hubcache.place(cpaths, revision, remote.commit)


def fetch_extras(
    checkpoint: str, *, token: str | None = None, cache_dir: Path | None = None
) -> tuple[dict[str, str], list[str]]:
    """Fetch the extra files that exist in the checkpoint repository; missing ones are skipped."""
    from huggingface_hub import hf_hub_download

    found: dict[str, str] = {}
    notes: list[str] = []
    for name in hub.EXTRA_FILES:
        try:
            with hub.translated_errors(f"{checkpoint}/{name}"):
                local = hf_hub_download(
                    checkpoint,
                    name,
                    token=token,
                    cache_dir=cache_dir,
                    endpoint=hub.endpoint(),
                    library_name=hub.LIBRARY_NAME,
                )
            found[name] = local
        except NotFoundOnHub:
            continue  # the checkpoint simply does not have this file
        except ModelError as exc:
            notes.append(f"Could not fetch {name}: {exc}")
    return found, notes


def _source_checkpoint(repo: str, given: str | None, token: str | None) -> str:
    if given is not None:
        return given
    if find_checkpoint(repo) is not None:
        return repo
    try:
        return hub.base_model_of(repo, token)
    except ModelError:
        return ""


def _check_space(cpaths: hubcache.CachePaths, size: int, opts: DownloadOptions) -> None:
    have = cpaths.partial.stat().st_size if cpaths.partial.exists() else 0
    needed = max(size - have, 0) + opts.space_margin
    probe = cpaths.repo_dir
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = opts.disk_usage(str(probe)).free
    if free < needed:
        raise NotEnoughDiskSpace(
            f"Not enough disk space: {format_bytes(needed, 'GiB')} needed in {probe}, "
            f"{format_bytes(free, 'GiB')} free. "
            "Free some space (or set HF_HUB_CACHE to another disk) and try again."
        )


def _transfer(
    remote: hub.RemoteFile,
    cpaths: hubcache.CachePaths,
    token: str | None,
    opts: DownloadOptions,
    cancel: threading.Event,
    meter: _Meter,
) -> None:
    """Fill ``cpaths.partial`` up to ``remote.size`` bytes, resuming and retrying as needed."""
    import httpx2
    from huggingface_hub import get_session, hf_raise_for_status

    cpaths.partial.parent.mkdir(parents=True, exist_ok=True)
    url = hub.download_url(remote)
    headers = hub.request_headers(token)
    headers["Accept-Encoding"] = "identity"  # byte offsets must be those of the file itself
    timeout = httpx2.Timeout(opts.stall_timeout_s, connect=opts.connect_timeout_s)
    failures = 0
    last_problem = ""
    stalled = False
    while True:
        if cancel.is_set():
            raise DownloadCancelled(_kept_message(cpaths, remote, "Download cancelled"))
        offset = cpaths.partial.stat().st_size if cpaths.partial.exists() else 0
        if offset > remote.size:
            cpaths.partial.unlink()
            offset = 0
        if offset == remote.size:
            return
        request_headers = dict(headers)
        if offset:
            request_headers["Range"] = f"bytes={offset}-"
        received = 0
        try:
            with (
                hub.translated_errors(f"{remote.repo}/{remote.name}"),
                get_session().stream(
                    "GET", url, headers=request_headers, timeout=timeout, follow_redirects=True
                ) as response,
            ):
                hf_raise_for_status(response)
                if offset and response.status_code != 206:
                    offset = 0  # the server ignored the Range: start over rather than corrupt
                meter.restart(offset)
                with cpaths.partial.open("r+b" if offset else "wb") as out:
                    out.seek(offset)
                    out.truncate()
                    for chunk in response.iter_bytes(opts.chunk_size):
                        if cancel.is_set():
                            raise DownloadCancelled(_kept_message(cpaths, remote, "Download cancelled"))
                        out.write(chunk)
                        received += len(chunk)
                        meter.chunk(offset + received, len(chunk))
            if offset + received >= remote.size:
                continue  # the loop's size check ends it (or truncates an over-long answer)
            last_problem, stalled = "the connection closed early", False
        except HubUnavailable as exc:
            cause = exc.__context__
            stalled = isinstance(cause, httpx2.ReadTimeout) or "ReadTimeout" in str(exc)
            last_problem = "no data arrived" if stalled else str(exc)
            if stalled:
                meter.note(
                    "download",
                    offset + received,
                    f"Stalled: no data for {opts.stall_timeout_s:g} s; retrying",
                    stalled=True,
                )
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                cpaths.partial.unlink(missing_ok=True)
                raise NotEnoughDiskSpace(
                    f"The disk filled up while downloading {remote.name} to {cpaths.repo_dir}. "
                    "The partial file was removed; free some space and try again."
                ) from None
            raise
        failures = 0 if received else failures + 1
        if failures > opts.retries:
            if stalled:
                raise DownloadStalled(
                    _kept_message(
                        cpaths,
                        remote,
                        f"The download stalled: the server sent nothing for {opts.stall_timeout_s:g} s, "
                        f"{failures} times in a row",
                    )
                )
            raise HubUnavailable(
                _kept_message(cpaths, remote, f"The download failed {failures} times ({last_problem})")
            )
        if failures:
            delay = min(opts.backoff_s * 2 ** (failures - 1), opts.max_backoff_s)
            if cancel.wait(delay):
                raise DownloadCancelled(_kept_message(cpaths, remote, "Download cancelled"))


def _verify(
    path: Path,
    remote: hub.RemoteFile,
    cancel: threading.Event,
    meter: _Meter,
    *,
    delete_on_mismatch: bool,
) -> str:
    """Hash the file and compare with the hub's sha256 (or git blob id for small non-LFS files)."""
    sha = sha256_file(path, lambda done, total: None, cancel)
    if remote.sha256 is not None:
        ok, expected, actual = sha == remote.sha256, remote.sha256, sha
    elif len(remote.etag) == 40:
        ok, expected, actual = git_blob_sha1(path) == remote.etag, remote.etag, git_blob_sha1(path)
    else:
        ok, expected, actual = False, "(the hub gave no checksum)", sha
    if not ok:
        if delete_on_mismatch:
            path.unlink(missing_ok=True)
        raise ChecksumMismatch(
            f"{remote.name} failed verification (expected {expected}, got {actual}). "
            + (
                "The file was deleted and not registered; download it again."
                if delete_on_mismatch
                else "The cached copy is damaged; delete it from the hub cache and download again."
            )
        )
    meter.note("verify", remote.size, "Checksum OK")
    return sha


def _kept_message(cpaths: hubcache.CachePaths, remote: hub.RemoteFile, head: str) -> str:
    have = cpaths.partial.stat().st_size if cpaths.partial.exists() else 0
    return (
        f"{head}. {format_bytes(have, 'MiB')} of {format_bytes(remote.size, 'MiB')} are kept; "
        "downloading again resumes where it stopped."
    )
