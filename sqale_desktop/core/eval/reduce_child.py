"""The child process that writes a reduced database (``conditions.build_reduced`` starts it).

Building a copy runs the source's own schema: its ``CREATE TABLE`` text (generated columns), its
index SQL (expressions, partial-index ``WHERE``), reading its virtual tables (the module's code).
One SQLite C call can run as long as its arguments ask, deaf to the progress handler, so this runs
in a process the parent kills at the time limit or on Stop; in here every statement also has the
progress-handler deadline, so an ordinary long statement ends with a message before the kill.
``CHECK`` constraints are not evaluated at all (``ignore_check_constraints``): the rows are the
source's, already checked when they were written.

The source is opened by the core's read-only path (``core.db.opening.connect_readonly``: ``mode=ro``
or ``immutable=1``, no ATTACH, ``trusted_schema`` off); rows travel through Python with their exact
storage class and bytes (text as raw bytes cast back to text, so invalid UTF-8 survives as it is).

Protocol (``core.child``'s messages): the plan is the child's (see :func:`build`); each step is
announced as a ``step`` message before it runs (the parent restarts its deadline there, and again
at each ``alive``, sent after every batch of rows copied), a table left out as a ``note``
``{"skipped": name, "reason": ...}``, and the end as ``done`` or ``error``.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqale_desktop.core import child
from sqale_desktop.core.db.opening import connect_readonly
from sqale_desktop.core.errors import KnownError

PROGRESS_STEPS = 1000
# Rows copied between two restarts of the deadline: a table of millions of rows takes as long as
# its data takes, while one row whose stored generated column runs away still meets the limit.
ROWS_PER_BATCH = 5000


class BuildFailed(KnownError):
    """A step could not be done; the message says which and why."""


def child_main(argv: Sequence[str]) -> int:
    """The child's entry (``--child-module sqale_desktop.core.eval.reduce_child``): plan on stdin."""
    del argv  # everything comes in the plan
    return child.serve(_serve)


def _serve(plan: dict[str, Any], endpoint: child.Endpoint) -> dict[str, Any]:
    def say(message: dict[str, Any]) -> None:
        if "step" in message:
            endpoint.say("step", step=message["step"])
        elif message.get("alive"):
            endpoint.say("alive")
        else:
            endpoint.say("note", **message)

    build(plan, say)
    return {}


def build(
    plan: dict[str, Any], say: Callable[[dict[str, Any]], None], *, cancel: threading.Event | None = None
) -> None:
    """Write the plan's tables and indexes into ``plan["target"]`` (a new, empty file).

    ``plan``: ``source`` (path), ``immutable``, ``target``, ``time_limit_s`` (per statement),
    ``tables`` (``name``, ``ddl`` (None: a virtual table, copied as a plain table of its columns),
    ``required`` (a gold table: failing it fails the build)), ``indexes`` (``table``, ``name``,
    ``sql``), ``collations`` (names the schema uses that SQLite lacks).  ``cancel``: Stop, for a
    build run in the app's own process (where nothing of the source is evaluated).
    """
    limit = float(plan["time_limit_s"])
    deadline = [time.monotonic() + limit]
    source = connect_readonly(Path(plan["source"]), immutable=bool(plan["immutable"]))
    source.text_factory = bytes  # exact bytes; cast back to text on insert
    out = sqlite3.connect(plan["target"], isolation_level=None)
    try:
        for conn in (source, out):
            conn.set_progress_handler(
                lambda: int(time.monotonic() > deadline[0] or (cancel is not None and cancel.is_set())),
                PROGRESS_STEPS,
            )
        for name in plan["collations"]:
            # Only so that the tables naming it can be read and created, and their indexes built:
            # Unicode case-insensitive, as Anki's unicase; readers of the copy lack it exactly as
            # readers of the source do.
            for conn in (source, out):
                conn.create_collation(name, _casefold_compare)
        out.execute("PRAGMA journal_mode = OFF")
        out.execute("PRAGMA synchronous = OFF")
        out.execute("PRAGMA ignore_check_constraints = 1")
        out.execute("BEGIN")
        copied: set[str] = set()

        def step(what: str) -> None:
            say({"step": what})
            deadline[0] = time.monotonic() + limit

        def alive() -> None:
            # rows keep coming: a big table is data, not a runaway (the limit is per batch of rows)
            say({"alive": True})
            deadline[0] = time.monotonic() + limit

        for table in plan["tables"]:
            name = table["name"]
            step(f"table {name}")
            out.execute("SAVEPOINT one_table")
            try:
                _copy_table(source, out, name, table["ddl"], alive)
            except sqlite3.Error as exc:
                reason = _reason(exc, limit, cancel)
                if table["required"] or str(exc) == "interrupted":
                    raise BuildFailed(f"the table {name} could not be copied: {reason}") from None
                out.execute("ROLLBACK TO one_table")
                say({"skipped": name, "reason": reason})  # a distractor: the copy goes on without it
            else:
                copied.add(name)
            out.execute("RELEASE one_table")
        for index in plan["indexes"]:
            if index["table"] not in copied:
                continue
            step(f"index {index['name']}")
            try:
                out.execute(index["sql"])
            except sqlite3.Error as exc:
                reason = _reason(exc, limit, cancel)
                if str(exc) == "interrupted":
                    raise BuildFailed(f"the index {index['name']} could not be built: {reason}") from None
                say({"skipped": f"index {index['name']}", "reason": reason})  # no such function, …
        out.execute("COMMIT")
    finally:
        out.close()
        source.close()


def _copy_table(
    source: sqlite3.Connection,
    out: sqlite3.Connection,
    name: str,
    ddl: str | None,
    alive: Callable[[], None],
) -> None:
    columns = [
        (str(row[1], "utf-8", "replace") if isinstance(row[1], bytes) else str(row[1]), row[6])
        for row in source.execute("SELECT * FROM pragma_table_xinfo(?)", (name,))
    ]
    # hidden: 0 an ordinary column, 1 a virtual table's hidden one, 2 and 3 generated (recomputed)
    plain = [column for column, hidden in columns if hidden == 0]
    if not plain:
        raise sqlite3.OperationalError("it has no columns that can be read")
    quoted = [_quote(c) for c in plain]
    out.execute(ddl if ddl is not None else f"CREATE TABLE {_quote(name)} ({', '.join(quoted)})")
    select = ", ".join(f"typeof({c}) = 'text', {c}" for c in quoted)
    values = ", ".join(
        f"CASE WHEN ?{2 * i + 1} THEN CAST(?{2 * i + 2} AS TEXT) ELSE ?{2 * i + 2} END"
        for i in range(len(plain))
    )
    insert = f"INSERT INTO main.{_quote(name)} ({', '.join(quoted)}) VALUES ({values})"
    rows = source.execute(f"SELECT {select} FROM main.{_quote(name)}")
    while batch := rows.fetchmany(ROWS_PER_BATCH):
        out.executemany(insert, batch)
        alive()


def _reason(exc: sqlite3.Error, limit: float, cancel: threading.Event | None) -> str:
    if str(exc) == "interrupted" and cancel is not None and cancel.is_set():
        return "cancelled"
    if str(exc) == "interrupted":
        return f"it ran past the {limit:g} s time limit"
    return str(exc)


def _casefold_compare(a: str, b: str) -> int:
    x, y = a.casefold(), b.casefold()
    return (x > y) - (x < y)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
