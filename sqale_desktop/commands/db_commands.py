"""``sqale-desktop tool`` and ``sqale-desktop query``: the database layer without the app.

``tool`` prints exactly the text the model would read, so a tool's behaviour can be checked from
a shell.  ``query`` runs read-only SQL, which is also how a user reruns an edited query headless.
Exit status: 0 success, 1 a tool's error text or a failing/denied query (message on stderr),
2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from sqale_desktop.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_db_argument
from sqale_desktop.core.db import DatabaseError, QueryResult, open_readonly, render_cell
from sqale_desktop.core.db.connection import DEFAULT_TIME_LIMIT_S
from sqale_desktop.core.export_formats import TextLayout, json_text, write_rows
from sqale_desktop.core.tools import TOOL_NAMES, ToolBox


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    tool = subparsers.add_parser(
        "tool",
        help="run one agent tool and print the text the model would see",
        description="Run one of the eight agent tools on a database and print exactly the text the "
        "model would read. Exit status: 0 ok, 1 the tool returned an error text, 2 bad usage.",
    )
    add_db_argument(tool)
    tool.add_argument("name", choices=TOOL_NAMES, metavar="NAME", help=f"one of: {', '.join(TOOL_NAMES)}")
    tool.add_argument(
        "json_args",
        nargs="?",
        default="{}",
        metavar="JSON_ARGS",
        help='arguments as a JSON object, e.g. \'{"table_name": "Track"}\'',
    )
    tool.set_defaults(handler=run_tool)

    query = subparsers.add_parser(
        "query",
        help="run read-only SQL on a database",
        description="Run one read-only SQL statement. A denied or failing statement exits with "
        "status 1 and its message on stderr.",
    )
    add_db_argument(query)
    query.add_argument("sql", metavar="SQL", help="one SQL statement")
    query.add_argument(
        "--format",
        choices=tuple(WRITERS),
        default="table",
        help="output format: table (for reading), or csv, tsv, json, markdown as the window exports",
    )
    query.add_argument(
        "--max-rows", type=_positive_int, default=1000, metavar="N", help="rows to print (1000)"
    )
    query.add_argument(
        "--timeout",
        type=_positive_float,
        default=DEFAULT_TIME_LIMIT_S,
        metavar="S",
        help="time limit in seconds (10)",
    )
    query.set_defaults(handler=run_query)


def run_tool(args: argparse.Namespace) -> int:
    try:
        tool_args = json.loads(args.json_args)
    except json.JSONDecodeError as exc:
        print(f"sqale-desktop tool: JSON_ARGS is not valid JSON: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, RecursionError) as exc:  # a number of 5,000 digits; nesting 100,000 deep
        what = "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
        print(f"sqale-desktop tool: JSON_ARGS cannot be read: {what}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(tool_args, dict):
        print("sqale-desktop tool: JSON_ARGS must be a JSON object", file=sys.stderr)
        return EXIT_USAGE
    try:
        db = open_readonly(resolve_db(args.db))
    except DatabaseError as exc:
        print(f"sqale-desktop tool: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for note in db.notes:  # an immutable snapshot may be stale: say so, as query does
        print(f"note: {note}", file=sys.stderr)
    with db:
        output = ToolBox(db).call(args.name, tool_args)
    _emit(lambda: print(output.text))
    return EXIT_OK if output.ok else EXIT_FAILED


def run_query(args: argparse.Namespace) -> int:
    try:
        with open_readonly(resolve_db(args.db), time_limit_s=args.timeout) as db:
            for note in db.notes:
                print(f"note: {note}", file=sys.stderr)
            result = db.execute(args.sql, max_rows=args.max_rows)
    except DatabaseError as exc:
        print(f"sqale-desktop query: {exc}", file=sys.stderr)
        return EXIT_FAILED
    _emit(lambda: WRITERS[args.format](result, sys.stdout))
    if result.truncated:
        print(
            f"note: showing the first {result.row_count} row{'' if result.row_count == 1 else 's'}; "
            "more rows exist (--max-rows)",
            file=sys.stderr,
        )
    return EXIT_OK


def _emit(write: Callable[[], None]) -> None:
    """Write to stdout; a reader that went away (``| head``) is not an error worth a traceback."""
    try:
        write()
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at devnull so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def write_table(result: QueryResult, out: TextIO) -> None:
    """Aligned columns for people, cells rendered as in the app's grid (display, not export:
    ``<blob 4 bytes>``, long text cut)."""
    cells = [[render_cell(v) for v in row] for row in result.rows]
    widths = [len(c) for c in result.columns]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    out.write(" | ".join(c.ljust(w) for c, w in zip(result.columns, widths, strict=True)).rstrip() + "\n")
    out.write("-+-".join("-" * w for w in widths) + "\n")
    for row in cells:
        out.write(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
    out.write(f"({result.row_count} row{'s' if result.row_count != 1 else ''})\n")


def write_csv(result: QueryResult, out: TextIO) -> None:
    """CSV as the window exports it (``core.export_formats``): NULL an empty field, BLOBs ``X'01FF'``."""
    write_rows(out, result.columns, result.rows, TextLayout("csv", newline="\n"))


def write_tsv(result: QueryResult, out: TextIO) -> None:
    """TSV as the window exports and copies it."""
    write_rows(out, result.columns, result.rows, TextLayout("tsv", newline="\n"))


def write_markdown(result: QueryResult, out: TextIO) -> None:
    """A Markdown table as the window's "Copy as Markdown table"."""
    write_rows(out, result.columns, result.rows, TextLayout("markdown", newline="\n"))


def write_json(result: QueryResult, out: TextIO) -> None:
    """One JSON object: columns, rows (arrays of cells as the window's JSON export writes them:
    NULL null, BLOBs ``"X'01FF'"``, infinities ``"inf"``), row_count, truncated."""
    document = {
        "columns": result.columns,
        "rows": result.rows,
        "row_count": result.row_count,
        "truncated": result.truncated,
    }
    out.write(json_text(document) + "\n")


WRITERS: dict[str, Callable[[QueryResult, TextIO], None]] = {
    "table": write_table,
    "csv": write_csv,
    "tsv": write_tsv,
    "json": write_json,
    "markdown": write_markdown,
}
"""``--format``'s choices; every one but ``table`` (display, as in the grid) is an export format."""


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def resolve_db(path: str | Path) -> Path:
    """The SQLite file for ``path``: itself, or the import of a CSV, Excel, Parquet… file or folder.

    The import's progress goes to a terminal's stderr on one line; Ctrl+C stops it (nothing is
    kept) and the CLI ends as for any interrupted command.  Its summary and notes go to stderr as
    ``note:`` lines, like the database's own notes.
    """
    from sqale_desktop.core.imports import ImportProgress, kind_of, resolve_database

    source = Path(path).expanduser()
    if kind_of(source) is None:
        return source
    live = sys.stderr.isatty()

    def show(progress: ImportProgress) -> None:
        if live:
            print("\r" + progress.line().ljust(100)[:120], end="", file=sys.stderr, flush=True)

    db_path, result = resolve_database(source, progress=show, ctrl_c_stops=True)
    if live:
        print("\r" + " " * 120 + "\r", end="", file=sys.stderr, flush=True)
    if result is not None:
        print(
            f"note: {result.summary}" + (" (imported before, unchanged)" if result.reused else ""),
            file=sys.stderr,
        )
        for line in result.notes + [f"foreign key {fk}" for fk in result.foreign_keys]:
            print(f"note: {line}", file=sys.stderr)
    return db_path
