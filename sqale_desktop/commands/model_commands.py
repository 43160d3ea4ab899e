"""``sqale-desktop models ...``: the model manager without the app.

``list``, ``import``, ``remove`` and ``verify`` never touch the network; only ``search`` and
``download`` contact the hub (``HF_ENDPOINT``).  The hub token comes from the keyring (or
huggingface_hub's own login), never from the command line, where it would land in shell history.
Exit status: 0 success, 1 a known problem (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from sqale_desktop.commands import EXIT_FAILED, EXIT_OK
from sqale_desktop.core.models import catalog
from sqale_desktop.core.models.errors import ModelError
from sqale_desktop.core.units import format_bytes


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    models = subparsers.add_parser(
        "models",
        help="list, search, download, import, remove and verify models",
        description="Manage the GGUF models the app can load. Only 'search' and 'download' use the "
        "network. Exit status: 0 ok, 1 a known problem (message on stderr), 2 bad usage.",
    )
    sub = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    p = sub.add_parser("list", help="registered models, the SQaLe catalog and GPU offload support")
    p.set_defaults(handler=run_list)

    p = sub.add_parser("search", help="find GGUF builds of a checkpoint on the hub")
    p.add_argument(
        "checkpoint",
        metavar="CHECKPOINT",
        help="checkpoint repository (e.g. trl-lab/qwen3.5-2b-grpo-sqale) or catalog name (M_SQaLe)",
    )
    p.add_argument("--limit", type=int, default=10, metavar="N", help="repositories to show (10)")
    p.set_defaults(handler=run_search)

    p = sub.add_parser("download", help="download a GGUF file, verify its sha256 and register it")
    p.add_argument("repo", metavar="REPO", help="hub repository holding the GGUF file")
    p.add_argument("file", metavar="FILE", help="file name in the repository, e.g. model-Q4_K_M.gguf")
    p.add_argument("--revision", default=None, metavar="REV", help="branch, tag or commit (main)")
    p.add_argument(
        "--checkpoint",
        default=None,
        metavar="CHECKPOINT",
        help="the SQaLe checkpoint it was built from (default: the repository card's base_model)",
    )
    p.add_argument(
        "--no-extras", action="store_true", help="do not fetch sqale_agent.py / generation_config.json"
    )
    p.add_argument("--select", action="store_true", help="make it the model the app uses")
    p.set_defaults(handler=run_download)

    p = sub.add_parser("import", help="register a local GGUF file where it is")
    p.add_argument("path", metavar="PATH", help="a .gguf file")
    p.add_argument(
        "--checkpoint", default="", metavar="CHECKPOINT", help="the SQaLe checkpoint it was built from"
    )
    p.add_argument("--select", action="store_true", help="make it the model the app uses")
    p.set_defaults(handler=run_import)

    p = sub.add_parser("remove", help="forget a registered model (the file itself is kept)")
    p.add_argument("id", metavar="ID", help="model id from 'models list'")
    p.set_defaults(handler=run_remove)

    p = sub.add_parser("verify", help="re-hash a registered model's file against its sha256")
    p.add_argument("id", metavar="ID", help="model id from 'models list'")
    p.set_defaults(handler=run_verify)


def _fail(exc: ModelError) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return EXIT_FAILED


def _select(model_id: str) -> None:
    from sqale_desktop.core import settings

    loaded = settings.load()
    loaded.settings.model_id = model_id
    settings.save(loaded.settings)


def run_list(args: argparse.Namespace) -> int:
    from sqale_desktop.core import settings
    from sqale_desktop.core.models.registry import Registry
    from sqale_desktop.core.runtime import gpu_offload

    try:
        records = Registry().list()
    except ModelError as exc:
        return _fail(exc)
    selected = settings.load().settings.model_id
    if records:
        print(f"{'':2}{'ID':<40} {'SIZE':>10}  {'CHECKPOINT':<34} PATH")
        for r in records:
            mark = "* " if r.id == selected else "  "
            print(f"{mark}{r.id:<40} {format_bytes(r.size):>10}  {r.source_checkpoint or '-':<34} {r.path}")
    else:
        print("No models registered yet: 'models search CHECKPOINT', then 'models download REPO FILE',")
        print("or 'models import PATH' for a GGUF file you already have.")
    print()
    print("SQaLe agents (execution accuracy %: SQaLe test / BIRD dev / EHRSQL; training schemas):")
    for entry in catalog.CATALOG:
        acc, tr = entry.accuracy, entry.training
        default = " (default)" if entry.default else ""
        print(
            f"  {entry.name:<9} {entry.repo_id:<34} {acc.sqale_test:5.1f} / {acc.bird_dev:5.1f} / "
            f"{acc.ehrsql:5.1f}  {tr.corpus}, median {tr.median_tables:g} tables{default}"
        )
    print()
    offload = gpu_offload()
    if offload.backends:
        print(f"llama.cpp backends: {offload.backends}")
    print(f"GPU offload: {offload.message}")
    return EXIT_OK


def _checkpoint_arg(text: str) -> str:
    by_name = {entry.name.casefold(): entry.repo_id for entry in catalog.CATALOG}
    return by_name.get(text.casefold(), text)


def run_search(args: argparse.Namespace) -> int:
    from sqale_desktop.core.models import hub

    checkpoint = _checkpoint_arg(args.checkpoint)
    try:
        token = hub.hub_token()
        repos = hub.search_gguf_repos(checkpoint, token=token, limit=args.limit)
        if not repos:
            print(f"No GGUF builds of {checkpoint} found on the hub. Convert the checkpoint")
            print(f"on this machine instead: sqale-desktop models convert {checkpoint}")
            return EXIT_OK
        for repo in repos:
            files = hub.list_gguf_files(repo, token=token)
            suggested = hub.suggest_file(files)
            print(repo)
            for f in files:
                mark = "  <- suggested" if suggested is not None and f.name == suggested.name else ""
                print(f"  {f.name:<60} {format_bytes(f.size):>10}  {f.quant or '?'}{mark}")
    except ModelError as exc:
        return _fail(exc)
    return EXIT_OK


class _ProgressPrinter:
    """One status line on stderr, rewritten in place, at most a few times a second."""

    def __init__(self) -> None:
        self.last_phase = ""

    def __call__(self, p: Any) -> None:
        if p.phase == "download":
            eta = f"{p.eta_s:.0f} s" if p.eta_s is not None else "?"
            done, total = format_bytes(p.done), format_bytes(p.total)
            speed = format_bytes(p.speed_bps, "MiB")
            line = f"\r{done} / {total}  {speed}/s  ETA {eta}" + (
                "  (stalled, retrying)" if p.stalled else ""
            )
            print(line.ljust(72), end="", file=sys.stderr, flush=True)
        elif p.message:
            prefix = "\n" if self.last_phase == "download" else ""
            print(f"{prefix}{p.message}", file=sys.stderr, flush=True)
        self.last_phase = p.phase


def run_download(args: argparse.Namespace) -> int:
    from sqale_desktop.core.models import hub
    from sqale_desktop.core.models.download import DownloadOptions, download_model

    cancel = threading.Event()
    try:
        result = download_model(
            args.repo,
            args.file,
            revision=args.revision,
            token=hub.hub_token(),
            source_checkpoint=_checkpoint_arg(args.checkpoint) if args.checkpoint else None,
            progress=_ProgressPrinter(),
            cancel=cancel,
            options=DownloadOptions(fetch_extras=not args.no_extras),
        )
    except KeyboardInterrupt:
        print("\nInterrupted; the partial download is kept; 'download' again resumes it.", file=sys.stderr)
        return EXIT_FAILED
    except ModelError as exc:
        print(file=sys.stderr)
        return _fail(exc)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.select:
        _select(result.record.id)
    print(f"{result.record.id}\t{result.record.path}")
    return EXIT_OK


def run_import(args: argparse.Namespace) -> int:
    from sqale_desktop.core.models.registry import Registry

    try:
        record = Registry().import_file(Path(args.path), source_checkpoint=_checkpoint_arg(args.checkpoint))
    except ModelError as exc:
        return _fail(exc)
    if args.select:
        _select(record.id)
    print(f"{record.id}\t{record.path}")
    warning = _fitness(Path(record.path), record.source_checkpoint)
    if warning:  # the model manager's words, at import, not first at the first question
        print(f"warning: {warning}", file=sys.stderr)
    return EXIT_OK


def _fitness(path: Path, source_checkpoint: str | None) -> str | None:
    """What the model manager says on importing the file: not a SQaLe agent, or unreadable."""
    from sqale_desktop.core.models.gguf_info import GgufUnreadable, fitness_warning, read_gguf_info

    try:
        return fitness_warning(read_gguf_info(path), source_checkpoint)
    except GgufUnreadable as exc:
        return str(exc)


def run_remove(args: argparse.Namespace) -> int:
    from sqale_desktop.core import settings
    from sqale_desktop.core.models.registry import Registry

    try:
        record = Registry().remove(args.id)
    except ModelError as exc:
        return _fail(exc)
    loaded = settings.load().settings
    if loaded.model_id == record.id:
        loaded.model_id = ""
        settings.save(loaded)
    print(f"Removed {record.id} from the registry; the file stays at {record.path}")
    return EXIT_OK


def run_verify(args: argparse.Namespace) -> int:
    from sqale_desktop.core.models.registry import Registry

    try:
        result = Registry().verify(args.id)
    except ModelError as exc:
        return _fail(exc)
    print(f"{result.record.id}: {result.message}")
    return EXIT_OK if result.ok else EXIT_FAILED
