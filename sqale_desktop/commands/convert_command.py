"""``sqale-desktop models convert``: build a quantized GGUF from a safetensors checkpoint.

Registered under the ``models`` group that ``model_commands`` owns; if that group is not there
(yet), it is created, so the command exists either way.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from sqale_desktop.commands import EXIT_FAILED, EXIT_OK
from sqale_desktop.core.models.errors import ModelError


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    from sqale_desktop.core.models.convert.quantize import DEFAULT_QUANT, QUANT_TYPES

    models = subparsers.choices.get("models")
    if models is None:
        models = subparsers.add_parser("models", help="Manage local model files.")
    groups = [a for a in models._actions if isinstance(a, argparse._SubParsersAction)]
    group = groups[0] if groups else models.add_subparsers(dest="models_command", metavar="SUBCOMMAND")
    parser = group.add_parser(
        "convert",
        help="Convert a safetensors checkpoint (hub repo id or local folder) to a quantized GGUF.",
        description="Convert a Qwen3.5 safetensors checkpoint to GGUF with numpy + gguf (no torch), "
        "quantize it with llama.cpp, check that it loads and generates, and register it.",
    )
    parser.add_argument("source", help="hub repository id (owner/name) or a local checkpoint folder")
    parser.add_argument("--quant", default=DEFAULT_QUANT, choices=[q for q in QUANT_TYPES if q != "F16"])
    parser.add_argument("--revision", help="hub revision (branch, tag or commit)")
    parser.add_argument(
        "--output-dir", type=Path, help="where the GGUF goes (default: the app's models folder)"
    )
    parser.add_argument("--threads", type=int, help="quantization threads (default: all cores)")
    parser.add_argument("--no-mtp", action="store_true", help="leave out the multi-token-prediction block")
    parser.add_argument("--no-register", action="store_true", help="write the file but do not register it")
    parser.set_defaults(handler=_convert)


def _convert(args: argparse.Namespace) -> int:
    from sqale_desktop.core.models.convert import ConvertOptions, ConvertProgress, convert_model

    last_phase = [""]

    def show(p: ConvertProgress) -> None:
        if p.phase in ("convert", "quantize") and p.total:
            end = "\n" if p.done == p.total else ""
            print(
                f"\r{p.phase}: {p.done}/{p.total} {p.message[:40]:<40}", end=end, file=sys.stderr, flush=True
            )
        elif p.phase != last_phase[0] or p.message:
            print(f"{p.phase}: {p.message}", file=sys.stderr, flush=True)
        last_phase[0] = p.phase

    token = None
    if not Path(args.source).expanduser().is_dir():
        from sqale_desktop.core.models.hub import hub_token

        token = hub_token()
    options = ConvertOptions(
        quant=args.quant,
        include_mtp=not args.no_mtp,
        threads=args.threads,
        register=not args.no_register,
        revision=args.revision,
        output_dir=args.output_dir,
    )
    cancel = threading.Event()
    try:
        result = convert_model(args.source, options, token=token, progress=show, cancel=cancel)
    except KeyboardInterrupt:
        cancel.set()
        print("cancelled; nothing was kept", file=sys.stderr)
        return 130
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    registered = f" (registered as {result.record.id})" if result.record else ""
    print(f"{result.path}{registered}")
    return EXIT_OK
