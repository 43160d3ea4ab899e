"""Checkpoint -> GGUF -> quantized GGUF -> verified -> registered, with progress and cancel.

The order is what makes failure safe: the unquantized GGUF is written to a private folder under
the cache, the quantized one to a hidden ``.partial`` name next to its final place, and only a file
that loaded and generated is renamed and registered.  Whatever happens (an error, a cancel, a
crash of the quantizer), the ``finally`` removes the private folder and any partial file, so
nothing half-written stays behind and nothing is registered.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sqale_desktop.core import paths
from sqale_desktop.core.models.convert.checkpoint import Checkpoint
from sqale_desktop.core.models.convert.errors import ConversionCancelled
from sqale_desktop.core.models.convert.hparams import read_hparams
from sqale_desktop.core.models.convert.layout import TensorPlan, plan_tensors
from sqale_desktop.core.models.convert.quantize import BYTES_PER_WEIGHT, DEFAULT_QUANT, QUANT_TYPES, quantize
from sqale_desktop.core.models.convert.source import fetch_checkpoint, remote_checkpoint
from sqale_desktop.core.models.convert.space import check_space
from sqale_desktop.core.models.convert.verify import VerifyReport, verify_gguf
from sqale_desktop.core.models.convert.writer import write_gguf
from sqale_desktop.core.models.files import DiskUsage, sha256_file
from sqale_desktop.core.models.registry import ModelRecord, Registry, slug_for
from sqale_desktop.core.units import format_bytes

ConvertPhase = Literal["download", "plan", "convert", "quantize", "verify", "register", "done"]
KEPT_FILES = ("generation_config.json", "sqale_agent.py")


@dataclass(frozen=True)
class ConvertProgress:
    """One progress report: ``done`` of ``total`` units (tensors, or 0/0 when unknown)."""

    phase: ConvertPhase
    done: int
    total: int
    message: str


ConvertProgressCallback = Callable[[ConvertProgress], None]


@dataclass(frozen=True)
class ConvertOptions:
    """Knobs of a conversion; tests redirect the folders and the disk-usage probe."""

    quant: str = DEFAULT_QUANT
    include_mtp: bool = True
    threads: int | None = None
    verify_tokens: int = 4
    register: bool = True
    revision: str | None = None
    output_dir: Path | None = None
    work_dir: Path | None = None
    hub_cache_dir: Path | None = None
    space_margin: int = 256 * 1024 * 1024
    disk_usage: DiskUsage = field(default=shutil.disk_usage)


@dataclass(frozen=True)
class ConversionResult:
    """The finished model: its path, what went in, and the figures of the run."""

    path: Path
    quant: str
    source: str
    checkpoint_dir: Path
    record: ModelRecord | None
    tensors: int
    mtp_written: bool
    skipped: int
    intermediate_bytes: int
    size: int
    verify: VerifyReport
    seconds: dict[str, float]
    extras: dict[str, str]


def models_dir() -> Path:
    """Default home of converted models."""
    return paths.data_dir() / "models"


def convert_model(
    source: str | Path,
    options: ConvertOptions | None = None,
    *,
    token: str | None = None,
    registry: Registry | None = None,
    progress: ConvertProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> ConversionResult:
    """Convert a checkpoint (a local folder, or a hub repo id) to a quantized, registered GGUF.

    Raises a ``ModelError`` subclass (``ConversionError``, ``NotEnoughDiskSpace``, hub errors)
    for known conditions; nothing is registered and no partial file is left in any case.
    """
    opts = options or ConvertOptions()
    if opts.quant not in QUANT_TYPES:
        raise ValueError(f"unknown quantization {opts.quant!r}; choose one of {', '.join(QUANT_TYPES)}")
    cancel = cancel or threading.Event()
    report = progress or (lambda _p: None)
    output_dir = opts.output_dir or models_dir()
    work_root = opts.work_dir or paths.cache_dir() / "convert"
    seconds: dict[str, float] = {}

    folder, label, revision = _resolve(source, opts, token, cancel, report, seconds)
    ckpt = Checkpoint(folder)
    hp = read_hparams(ckpt.config)
    plan = plan_tensors(ckpt, hp, include_mtp=opts.include_mtp)
    final_estimate = int(plan.total_bytes * BYTES_PER_WEIGHT[opts.quant] / 2)
    report(ConvertProgress("plan", 0, 0, _plan_message(plan)))
    check_space({work_root: plan.total_bytes, output_dir: final_estimate}, opts.space_margin, opts.disk_usage)

    stem = f"{_base_name(label)}-{opts.quant}"
    work = work_root / f"{stem}-{uuid.uuid4().hex[:8]}"
    output_dir.mkdir(parents=True, exist_ok=True)
    final = _free_path(output_dir, stem)
    partial = final.with_name(f".{final.name}.partial")
    extras_dir = final.with_name(f"{final.stem}.extras")
    finished = False
    try:
        work.mkdir(parents=True)
        intermediate = work / f"{stem}-unquantized.gguf"
        started = time.monotonic()
        write_gguf(
            ckpt,
            hp,
            plan,
            intermediate,
            name=_base_name(label),
            cancel=cancel,
            progress=lambda i, n, name: report(ConvertProgress("convert", i, n, name)),
        )
        seconds["convert"] = time.monotonic() - started
        _raise_if_cancelled(cancel)
        started = time.monotonic()
        quantize(
            intermediate,
            partial,
            opts.quant,
            threads=opts.threads,
            cancel=cancel,
            progress=lambda i, n, name: report(ConvertProgress("quantize", i, n, name)),
        )
        seconds["quantize"] = time.monotonic() - started
        intermediate.unlink()
        _raise_if_cancelled(cancel)
        report(ConvertProgress("verify", 0, 0, "Loading the model and generating a few tokens"))
        started = time.monotonic()
        verified = verify_gguf(partial, n_tokens=opts.verify_tokens)
        seconds["verify"] = time.monotonic() - started
        _raise_if_cancelled(cancel)
        extras = _keep_extras(folder, extras_dir)
        partial.rename(final)
        record = None
        if opts.register:
            report(ConvertProgress("register", 0, 0, "Registering the model"))
            record = (registry or Registry()).add(
                ModelRecord(
                    id=slug_for(final.name),
                    path=str(final.resolve()),
                    sha256=sha256_file(final),
                    size=final.stat().st_size,
                    origin="convert",
                    repo="" if Path(str(source)).is_dir() else str(source),
                    file=final.name,
                    revision=revision,
                    source_checkpoint=label,
                    extras=extras,
                )
            )
        finished = True
    finally:
        shutil.rmtree(work, ignore_errors=True)
        partial.unlink(missing_ok=True)
        if not finished:
            final.unlink(missing_ok=True)
            shutil.rmtree(extras_dir, ignore_errors=True)
    report(ConvertProgress("done", 1, 1, f"Wrote {final}"))
    return ConversionResult(
        path=final,
        quant=opts.quant,
        source=str(source),
        checkpoint_dir=folder,
        record=record,
        tensors=len(plan.tensors),
        mtp_written=plan.mtp_written,
        skipped=len(plan.skipped),
        intermediate_bytes=plan.total_bytes,
        size=final.stat().st_size,
        verify=verified,
        seconds=seconds,
        extras=extras,
    )


def _resolve(
    source: str | Path,
    opts: ConvertOptions,
    token: str | None,
    cancel: threading.Event,
    report: ConvertProgressCallback,
    seconds: dict[str, float],
) -> tuple[Path, str, str]:
    local = Path(source).expanduser()
    if local.is_dir():
        return local.resolve(), local.resolve().name, ""
    repo = str(source)
    if "/" not in repo or repo.count("/") > 1:
        raise ValueError(f"{repo!r} is neither a folder nor a hub repository id (owner/name)")
    remote = remote_checkpoint(repo, opts.revision, token)
    # Room for the download plus the intermediate (about as large as the text weights).
    hub_cache = opts.hub_cache_dir or _hub_cache()
    work_root = opts.work_dir or paths.cache_dir() / "convert"
    check_space({hub_cache: remote.size, work_root: remote.size}, opts.space_margin, opts.disk_usage)
    size = format_bytes(remote.size, "GiB")
    report(ConvertProgress("download", 0, remote.size, f"Downloading {repo} ({size})"))
    started = time.monotonic()
    folder = fetch_checkpoint(
        remote,
        token=token,
        cache_dir=opts.hub_cache_dir,
        cancel=cancel,
        progress=lambda done, total, name: report(ConvertProgress("download", done, total, name)),
    )
    seconds["download"] = time.monotonic() - started
    return folder, repo, remote.commit


def _hub_cache() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def _raise_if_cancelled(cancel: threading.Event) -> None:
    if cancel.is_set():
        raise ConversionCancelled("conversion cancelled")


def _keep_extras(folder: Path, extras_dir: Path) -> dict[str, str]:
    """Copy the small files the app uses next to the GGUF (a local folder may go away)."""
    extras: dict[str, str] = {}
    for name in KEPT_FILES:
        src = folder / name
        if src.is_file():
            extras_dir.mkdir(parents=True, exist_ok=True)
            dst = extras_dir / name
            shutil.copyfile(src, dst)
            extras[name] = str(dst.resolve())
    return extras


def _base_name(label: str) -> str:
    name = label.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "model"


def _free_path(folder: Path, stem: str) -> Path:
    candidate = folder / f"{stem}.gguf"
    n = 2
    while candidate.exists():
        candidate = folder / f"{stem}-{n}.gguf"
        n += 1
    return candidate


def _plan_message(plan: TensorPlan) -> str:
    mtp = "with" if plan.mtp_written else "without"
    return (
        f"{len(plan.tensors)} tensors ({format_bytes(plan.total_bytes, 'MiB')} unquantized), {mtp} the "
        f"multi-token-prediction block; {len(plan.skipped)} checkpoint tensors skipped"
    )
