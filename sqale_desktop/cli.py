"""The `sqale-desktop` command: no arguments or database files open the desktop app; subcommands are headless.

``sqale-desktop FILE...`` is what a desktop's "Open with" runs (the desktop entry's ``%F``), so
file arguments and subcommands share the first position: an argument is a subcommand only when
it names one and no file of that name exists (``./ask`` or an existing file called ``ask`` opens
that file); any option-looking argument (``--help``, ``--version``, a subcommand's flags) goes to
argparse as before, and ``--`` ends options so that ``sqale-desktop -- -odd.db`` opens
``-odd.db``.  A second launch starts a second, independent window (no single-instance server):
each window has its own engine, which is simpler and honest about memory.

The headless commands work with PySide6 uninstalled: the Qt app is imported only when the window
opens.  Each group of subcommands lives in its own module under ``sqale_desktop.commands`` and
registers itself here.  ``--child-module`` is hidden: the converter's child processes use it so
that a frozen build (whose ``sys.executable`` is this program, not Python) can run them too.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from sqale_desktop import __version__

USAGE = """%(prog)s [FILE ...]
       %(prog)s COMMAND [options]
       %(prog)s [-h] [--version]"""

FILES_HELP = """\
Without a command, opens the desktop app: with the FILEs given, one tab each (the demo database
when none is given). A FILE is a SQLite database, a data file (CSV, TSV, delimited TXT, JSON,
JSONL, their .gz, an Excel or OpenDocument workbook, Parquet, DuckDB) or a folder of data files;
a data file is imported into the app's cache, never next to it. An argument that names an
existing file is a file even when it is also a command's name; use `%(prog)s -- FILE ...` for file
names that begin with '-'.
`%(prog)s --verbose FILE ...` logs everything (DEBUG) to the terminal and the log file.
Each launch opens its own window."""


GLOBAL_FLAGS = ("-v", "--verbose")
"""The options that apply to the window as well as to the commands (given before either)."""


def build_parser() -> argparse.ArgumentParser:
    from sqale_desktop.commands import register_all

    parser = argparse.ArgumentParser(
        prog="sqale-desktop",
        usage=USAGE,
        description=(
            "Ask questions about local SQLite databases and data files with a local text-to-SQL agent."
        ),
        epilog=FILES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"sqale-desktop {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log everything (DEBUG) to the terminal and the log file; put it before the command",
    )
    # prog: the subcommands' usage lines start "sqale-desktop ask", not with the custom usage above.
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", prog="sqale-desktop")
    register_all(subparsers)
    return parser


def command_names(parser: argparse.ArgumentParser) -> set[str]:
    """The top-level subcommand names and aliases ``parser`` accepts."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def launch_files(args: Sequence[str], commands: set[str]) -> list[str] | None:
    """The files to open in the window if ``args`` asks for the window, else None (a subcommand).

    ``--`` makes everything after it a file.  Any other option-looking argument means argparse's
    business (help, version, a subcommand).  A first argument that names a command is that
    command unless a file or folder of that name exists.
    """
    if not args:
        return []
    if args[0] == "--":
        return list(args[1:])
    if any(a.startswith("-") for a in args):
        return None
    if args[0] in commands and not Path(args[0]).exists():
        return None
    return list(args)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["--child-module"]:
        from sqale_desktop.core.child.launch import run_child

        return run_child(args_list[1:])
    parser = build_parser()
    # The global options before the files (`sqale-desktop --verbose FILE`) are the window's too.
    window_args = list(args_list)
    verbose = False
    while window_args[:1] and window_args[0] in GLOBAL_FLAGS:
        verbose = True
        window_args.pop(0)
    files = launch_files(window_args, command_names(parser))
    if files is not None:
        try:
            from sqale_desktop.ui.app import run_app
        except ImportError as exc:  # a headless install (no PySide6): say so, no traceback
            if not (exc.name or "").startswith(("PySide6", "shiboken6")):
                raise  # one of our own modules is broken: that traceback is needed
            print(
                f"sqale-desktop: the desktop app cannot start ({exc}); the commands work without it "
                "(sqale-desktop --help)",
                file=sys.stderr,
            )
            return 1
        # Absolute now, against the folder the command runs in: the tabs and the recent list keep
        # them, and the next launch may start anywhere.
        return run_app(files=[Path(os.path.abspath(f)) for f in files], verbose=verbose)
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    from sqale_desktop.core import logs
    from sqale_desktop.core.errors import is_known

    logs.configure(verbose=args.verbose)
    log = logging.getLogger("sqale_desktop.cli")
    log.debug("sqale-desktop %s %s (Python %s)", __version__, args.command, sys.version.split()[0])
    handler = args.handler
    try:
        result: int = handler(args)
        sys.stdout.flush()  # a closed pipe shows here rather than at exit, where it cannot be caught
    except BrokenPipeError:
        return _pipe_closed()
    except KeyboardInterrupt:
        # Ctrl+C: the command cleaned up on its way out (an import keeps nothing), so no traceback.
        print(f"sqale-desktop {args.command}: stopped (Ctrl+C)", file=sys.stderr)
        return 130
    except Exception as exc:
        if not is_known(exc):
            # a bug: the traceback is what is needed to fix it, in the log file and on the terminal
            log.error("bug in `sqale-desktop %s`", args.command, exc_info=True)
            raise
        log.info("sqale-desktop %s: %s", args.command, exc)
        print(f"sqale-desktop {args.command}: {exc}", file=sys.stderr)
        return 1
    return result


def _pipe_closed() -> int:
    """The reader of stdout went away (``| head``): stop quietly, as command-line tools do.

    stdout is pointed at /dev/null so that the interpreter's final flush does not raise again.
    """

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + 13  # killed by SIGPIPE, as a C tool would report it
