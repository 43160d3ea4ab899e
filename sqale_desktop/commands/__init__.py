"""Headless subcommands, one module per group; each exposes ``register(subparsers)``.

A subcommand sets ``handler`` (a function taking the parsed namespace and returning the exit
status) with ``parser.set_defaults(handler=...)``.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

# Exit statuses shared by every subcommand (the README and each command's --help state them).
EXIT_OK = 0
EXIT_FAILED = 1  # a known problem: the message is on stderr
EXIT_USAGE = 2  # bad usage, as argparse itself exits

# Modules are listed here rather than discovered so that a missing one is an import error, not a
# silently absent command.
COMMAND_MODULES = ("db_commands", "agent_commands", "model_commands", "convert_command", "eval_command")


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """``--db PATH``, the database a command works on, worded alike in every command that takes it."""
    parser.add_argument("--db", required=True, metavar="PATH", help="SQLite database file (opened read-only)")


def register_all(subparsers: argparse._SubParsersAction[Any]) -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"sqale_desktop.commands.{name}").register(subparsers)
