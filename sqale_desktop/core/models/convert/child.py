"""Running a module of this package in a child process, from a checkout and from a frozen build.

Quantization and verification call into native llama.cpp; a child process makes them
cancellable (terminate) and keeps a native crash out of the app.  ``sys.executable -m module``
only works where ``sys.executable`` is Python: in a frozen (PyInstaller) build it is the app
itself, which does not understand ``-m``.  So the child is started through the app's own entry
point with the hidden ``--child-module MODULE ARGS...`` argument (``sqale_desktop.cli``), which
both a frozen binary and ``python -m sqale_desktop`` understand, and which calls the module's
``child_main(argv)``.  From a checkout the package's parent folder is put first on the child's
``PYTHONPATH`` so that the child imports this copy even when the package is not installed.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

_PACKAGE_PARENT = Path(__file__).resolve().parents[4]
# Only the converter's own steps, the evaluation's reduced-copy builder and the database worker
# (core.db.worker) may be started this way: the hidden argument is not a general "run any
# module" door.
CHILD_MODULE_PREFIX = "sqale_desktop.core.models.convert."
DB_WORKER_MODULE = "sqale_desktop.core.db.worker"
CHILD_MODULES = (CHILD_MODULE_PREFIX, "sqale_desktop.core.eval.reduce_child", DB_WORKER_MODULE)
CHILD_FLAG = "--child-module"


def is_frozen() -> bool:
    """True in a PyInstaller (or similar) build, where ``sys.executable`` is the app."""
    return bool(getattr(sys, "frozen", False))


def child_command(module: str, *args: str) -> list[str]:
    """The command line that runs ``module``'s ``child_main(args)`` in a new process."""
    if is_frozen():
        program = Path(sys.executable)
        # Windows: the window program is windowed (no stdout/stderr); the folder's console
        # twin (packaging/sqale-desktop.spec) is the one whose output the parent can read.
        console_twin = program.with_name("sqale-desktop-cli.exe")
        if sys.platform == "win32" and console_twin.exists():
            program = console_twin
        return [str(program), CHILD_FLAG, module, *args]
    return [sys.executable, "-m", "sqale_desktop", CHILD_FLAG, module, *args]


def child_env() -> dict[str, str]:
    """The current environment with this package importable."""
    env = dict(os.environ)
    if not is_frozen():
        parts = [str(_PACKAGE_PARENT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def run_child(argv: list[str]) -> int:
    """The child side: ``argv`` is ``[MODULE, ARGS...]``; returns the exit status."""
    if not argv or not argv[0].startswith(CHILD_MODULES):
        print(f"{CHILD_FLAG} takes a module of {CHILD_MODULE_PREFIX.rstrip('.')}", file=sys.stderr)
        return 2
    module = importlib.import_module(argv[0])
    entry = getattr(module, "child_main", None)
    if entry is None:
        print(f"{argv[0]} has no child_main", file=sys.stderr)
        return 2
    return int(entry(argv[1:]))
