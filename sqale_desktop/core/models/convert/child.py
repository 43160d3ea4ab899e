"""Running a module of this package in a child Python process.

Quantization and verification call into native llama.cpp; a child process makes them
cancellable (terminate) and keeps a native crash out of the app.  The child must import this
package even when it is not installed (a source checkout run with ``PYTHONPATH`` or from its
folder), so the package's parent folder is put first on the child's ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_PACKAGE_PARENT = Path(__file__).resolve().parents[4]


def child_command(module: str, *args: str) -> list[str]:
    """The command line that runs ``python -m module args...`` with this interpreter."""
    return [sys.executable, "-m", module, *args]


def child_env() -> dict[str, str]:
    """The current environment with this package importable."""
    env = dict(os.environ)
    parts = [str(_PACKAGE_PARENT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env
