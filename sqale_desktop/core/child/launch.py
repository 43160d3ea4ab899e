"""Starting a module of the app in a child process, from a checkout and from a frozen build.

``sys.executable -m module`` only works where ``sys.executable`` is Python: in a frozen
(PyInstaller) build it is the app itself, which does not understand ``-m``.  So the child is
started through the app's own entry point with the hidden ``--child-module MODULE ARGS...``
argument (``sqale_desktop.cli``), which both a frozen binary and ``python -m sqale_desktop``
understand, and which calls the module's ``child_main(argv)``.  From a checkout the package's
parent folder is put first on the child's ``PYTHONPATH`` so that the child imports this copy even
when the package is not installed.  Every module started this way must be named in
``packaging/sqale-desktop.spec``'s hidden imports (it is imported by name, which PyInstaller's
analysis cannot see).

The memory cap (``RLIMIT_AS``) travels in :data:`MEMORY_ENV` and is applied here, in the child,
before the module is imported: ``preexec_fn`` would do it between fork and exec, which is unsafe
in a parent that runs threads.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path

_PACKAGE_PARENT = Path(__file__).resolve().parents[3]
# Only these may be started this way: the hidden argument is not a general "run any module" door.
CHILD_MODULES = (
    "sqale_desktop.core.models.convert.",  # the converter's quantizer and its check
    "sqale_desktop.core.eval.reduce_child",  # the evaluation's reduced copy
    "sqale_desktop.core.db.worker",  # the database worker
    "sqale_desktop.core.imports.isolated",  # every importer of a user's file
    "sqale_desktop.core.engines.llama.gpu_probe",  # a GPU backend's first load
)
CHILD_FLAG = "--child-module"
MEMORY_ENV = "SQALE_DESKTOP_CHILD_MEMORY_MB"
applied_memory_mb: int | None = None  # in a child: the cap run_child applied (for its messages)


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


def child_env(memory_mb: int | None = None, temp_dir: Path | None = None) -> dict[str, str]:
    """The current environment with this package importable, the memory cap and the temp folder."""
    env = dict(os.environ)
    if not is_frozen():
        parts = [str(_PACKAGE_PARENT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(parts)
    env.pop(MEMORY_ENV, None)
    if memory_mb is not None:
        env[MEMORY_ENV] = str(int(memory_mb))
    if temp_dir is not None:
        for name in ("TMPDIR", "TEMP", "TMP"):
            env[name] = str(temp_dir)
    return env


def apply_memory_cap(memory_mb: int) -> None:
    """Cap this process's address space at ``memory_mb`` MB (0: no cap; POSIX, a no-op
    elsewhere) and leave no core file; every child of the app, the database worker included."""
    try:
        import resource
    except ImportError:  # Windows: no RLIMIT_AS; the parent's deadline and Stop still hold
        return
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash here leaves no core file behind
    if memory_mb <= 0:
        return
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = memory_mb * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def run_child(argv: list[str]) -> int:
    """The child side: ``argv`` is ``[MODULE, ARGS...]``; returns the exit status."""
    if not argv or not argv[0].startswith(CHILD_MODULES):
        print(f"{CHILD_FLAG} takes one of the app's child modules", file=sys.stderr)
        return 2
    global applied_memory_mb
    cap = os.environ.pop(MEMORY_ENV, "")
    if cap.isdigit():
        applied_memory_mb = int(cap)
        apply_memory_cap(applied_memory_mb)
    module = importlib.import_module(argv[0])
    entry = getattr(module, "child_main", None)
    if entry is None:
        print(f"{argv[0]} has no child_main", file=sys.stderr)
        return 2
    return int(entry(argv[1:]))
