"""The `sqale-desktop` command: no arguments opens the desktop app; subcommands are headless.

The headless commands work with PySide6 uninstalled: the Qt app is imported only when no
subcommand is given.  Each group of subcommands lives in its own module under
``sqale_desktop.commands`` and registers itself here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sqale_desktop import __version__


def build_parser() -> argparse.ArgumentParser:
    from sqale_desktop.commands import register_all

    parser = argparse.ArgumentParser(
        prog="sqale-desktop",
        description="Ask questions about local SQLite databases with a local text-to-SQL agent. "
        "Without a subcommand, opens the desktop app.",
    )
    parser.add_argument("--version", action="version", version=f"sqale-desktop {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    register_all(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list:
        from sqale_desktop.ui.app import run_app

        return run_app()
    parser = build_parser()
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    handler = args.handler
    result: int = handler(args)
    return result
