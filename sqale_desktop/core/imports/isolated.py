"""Every import of a user's file runs in a child process the app can kill (``core.child``).

The readers parse whatever a file holds: a workbook whose one cell at ``XFD1048576`` makes calamine
ask for 512 GB (Rust aborts the process), a JSON of a million keys, a Parquet page that expands to
gigabytes, a DuckDB view that runs for minutes.  In the app's own process each of those was the
app's end, or a Stop that did nothing.  Here the whole build (:func:`.assembly.build`:
every reader, the fast paths and the SQLite writer) runs in a child under the memory cap
(``RLIMIT_AS``, the settings' figure), and:

- only progress crosses the pipe: the child writes the SQLite file itself into the cache folder's
  ``.building``, so the fast paths keep their speed;
- Stop (the window's, Ctrl+C, closing the tab or the window) kills the child at once, whatever C
  call it is in, and the parent removes ``.building`` and the child's private temporary folder
  (the child's ``TMPDIR``): nothing is left;
- each import's child is forked from one warm importer (``core.child.forks``, Linux: it imported
  Arrow and the readers once, as the parent used to once per session), so an import pays neither
  the interpreter's start nor that second; elsewhere the next import's child is started when one
  ends and imports them while it waits;
- a crash, the memory cap or a bug in a reader is an :class:`ImportCrashed` (an ``ImportFailed``)
  naming the file and what happened; the window does not restore a tab whose import crashed.

The parent keeps what is cheap and reads no content but the hash: the cache's manifest, reuse,
the source's SHA-256 (hashed beside the import) and the final rename (``core.imports``).
"""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqale_desktop.core import child
from sqale_desktop.core.imports.plan import ImportPlan
from sqale_desktop.core.imports.progress import ImportCancelled, ImportFailed, ImportProgress, ProgressFn

if TYPE_CHECKING:
    from sqale_desktop.core.imports import ImportResult

MODULE = "sqale_desktop.core.imports.isolated"
# False runs the build in this process: only for tests of the readers themselves, which patch
# them here (tests/core/imports/conftest.py); the app, the CLI and the journeys never change it.
IN_CHILD = True


class ImportCrashed(ImportFailed):
    """The importer's process died (a signal, the memory cap) or a reader hit a bug: the file, not
    the app, is the problem; the message names the file and what happened."""


def build(plan: ImportPlan, progress: ProgressFn | None, cancel: threading.Event | None) -> ImportResult:
    """``core.imports.assembly.build`` in a child: the same :class:`ImportResult`, or the same errors."""
    from sqale_desktop.core.imports import progress as progress_mod
    from sqale_desktop.core.imports.result import TableSummary

    if not IN_CHILD:
        from sqale_desktop.core.imports.assembly import build as build_here

        return build_here(plan, progress, cancel)
    # The readers (.assembly and what it imports: 50-60 ms) are never imported here: the parent
    # of an import reads no content, and the first import of a process waits for them otherwise.
    request = {"report_interval_s": progress_mod.REPORT_INTERVAL_S, **plan.to_message()}

    def heard(message: child.Message) -> None:
        if message.kind == "progress" and progress is not None:
            progress(ImportProgress(**message.data))

    folder, name = plan.folder, plan.source.name
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done = child.run(
            MODULE,
            request,
            what="the importer",
            cancel=cancel,
            on_message=heard,
            spare=True,
        )  # fmt: skip  (the memory cap: the kit's, from the settings)
    except BaseException as exc:
        shutil.rmtree(folder / ".building", ignore_errors=True)  # a killed child cleans nothing
        if isinstance(exc, child.ChildStopped):
            raise ImportCancelled(f"Import of {name} stopped; nothing was kept.") from None
        if isinstance(exc, child.ChildDied):
            raise ImportCrashed(f"{name} could not be imported: {exc}; nothing was kept.") from None
        if isinstance(exc, child.ChildFailed) and exc.kind == "known":
            raise ImportFailed(str(exc)) from None
        if isinstance(exc, child.ChildFailed) and exc.kind == "memory":
            raise ImportCrashed(
                f"{name} could not be imported: the importer {exc}; nothing was kept."
            ) from None
        if isinstance(exc, child.ChildFailed):
            raise ImportCrashed(
                f"{name} could not be imported: the importer failed ({exc}); nothing was kept."
            ) from None
        raise
    if cancel is not None and cancel.is_set():
        # Stop came while the child finished (its last report still on its way): the person
        # stopped it, so nothing is kept, as for a Stop a moment earlier.
        shutil.rmtree(folder / ".building", ignore_errors=True)
        raise ImportCancelled(f"Import of {name} stopped; nothing was kept.")
    from sqale_desktop.core.imports import ImportResult

    data = done.data
    return ImportResult(
        plan.db_path,
        plan.source,
        str(data["summary"]),
        [TableSummary(**t) for t in data["tables"]],
        list(data["notes"]),
        list(data["foreign_keys"]),
    )


def _serve(request: dict[str, Any], endpoint: child.Endpoint) -> dict[str, Any]:
    from dataclasses import asdict

    from sqale_desktop.core.imports import assembly, progress

    progress.REPORT_INTERVAL_S = float(request.get("report_interval_s", progress.REPORT_INTERVAL_S))

    def report(p: ImportProgress) -> None:
        endpoint.say("progress", **asdict(p))

    result = assembly.build(ImportPlan.from_message(request), report, None)  # Stop is the parent's kill
    return {
        "summary": result.summary,
        "tables": [asdict(t) for t in result.tables],
        "notes": result.notes,
        "foreign_keys": result.foreign_keys,
    }


def _load_sqlite_driver() -> None:
    """Load ADBC's SQLite driver (a shared library the driver manager opens at the first
    connection, then keeps): each forked child finds it loaded."""
    import adbc_driver_sqlite.dbapi

    adbc_driver_sqlite.dbapi.connect(":memory:").close()


def _load_detector() -> None:
    """A first guess of a file's encoding loads charset_normalizer and the codecs it tries (tens
    of milliseconds): the first import of a file that is not UTF-8 does not pay them."""
    from sqale_desktop.core.imports import text

    # Not UTF-8 before the end: a lone cp1252 byte at the very end reads as a UTF-8 sequence that
    # goes on in the next block, and the detector is never asked.
    text.detect_encoding("caf\u00e9 cr\u00e8me".encode("cp1252"))


def _load_time_zones() -> None:
    """Arrow reads the time-zone database (a walk of ``/usr/share/zoneinfo``: 25-30 ms) at the
    first formatting of a timestamp, which a Parquet or DuckDB timestamp column needs."""
    import pyarrow as pa
    import pyarrow.compute as pc

    pc.strftime(pa.array([0], pa.timestamp("s")), format="%Y")


# What the readers and the fast paths import or load, most used first: a fork server takes the
# steps once (while idle), a spare child while it waits for its plan (``core.child.serve``).
# A child forked after them imports no module for any kind of file but the codecs the encoding
# detector tries on a file's bytes (tests/core/imports/test_importer_warm_up.py).
WARM: tuple[child.WarmStep, ...] = (
    "sqale_desktop.core.imports.assembly",
    "sqale_desktop.core.imports.fast_text",
    "sqale_desktop.core.imports.text",
    _load_detector,  # a CSV that is not UTF-8 (a spreadsheet's export): before the slow ones
    "pyarrow.csv",
    "pyarrow.compute",
    "adbc_driver_sqlite.dbapi",  # half a second: it imports pyarrow.dataset
    _load_sqlite_driver,
    "sqale_desktop.core.imports.arrow_writer",
    "numpy.ma",  # numpy imports it at the first pa.array of an ndarray (the writer's row groups)
    "sqale_desktop.core.imports.builder",
    "sqale_desktop.core.imports.fast_typed",
    "pyarrow.parquet",
    _load_time_zones,
    "sqale_desktop.core.imports.excel",
    "python_calamine",
    "encodings.cp437",  # zipfile's names in a workbook
    "sqale_desktop.core.imports.json_source",
    "sqale_desktop.core.imports.typed",
    "sqale_desktop.core.imports.foreign_keys",
    "duckdb",
)


def child_main(argv: Sequence[str]) -> int:
    """The child's entry (``--child-module sqale_desktop.core.imports.isolated``): plan on stdin.

    The libraries every fast path needs (:data:`WARM`) are imported ahead of the work, not while
    a person waits: by the fork server (``core.child.run(spare=True)``) once, while it is idle
    (the first import of a session may come sooner and imports what it needs itself), or by a
    spare child before it reads its plan."""
    del argv
    _hide_pandas()
    return child.serve(_serve, warm=WARM)


class _NoPandas:
    """A finder, first on ``sys.meta_path``, for which pandas is not installed (see
    :func:`_hide_pandas`).  ``sys.modules["pandas"] = None``, the usual way, is not enough:
    pyarrow's Cython import reads ``sys.modules`` directly and takes the None for the module."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (left out of the importer)", name=name)


def _hide_pandas() -> None:
    """Make ``import pandas`` fail in the importer, as in the packaged app, which leaves pandas out
    (``packaging/sqale-desktop.spec``).

    pyarrow imports pandas, when it is installed, at its first conversion of a Python value
    (``pa.scalar``, ``pa.array``, a compute function's literal), only to tell pandas objects from
    others; no reader makes one.  In an environment that has pandas (a pip install beside data
    tools, the project's own test environment) that cost each importer 0.37 s of CPU, paid by
    the first import of a session, and 33 MB resident (115 against 82 MB after pyarrow's
    readers); pyarrow takes the failed import as "no pandas" (its ``pandas_api`` shim)."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())


def start_ahead(request_follows: bool = False) -> None:
    """Start the importers' fork server now, in the background (``core.child.start_ahead``), when
    a person is about to choose a file (the window's Open… dialogs, a file dragged over it):
    the import they start then forks from a warm server rather than wait for its interpreter and
    the readers' libraries (a 32 MB CSV, the first of a session: 1.8 s against 2.8-3.0 s).
    ``request_follows``: an import is beginning (``core.imports.import_source``): the server
    starts beside its checks and waits for its request before warming up."""
    if IN_CHILD:
        child.start_ahead(MODULE, request_follows=request_follows)
