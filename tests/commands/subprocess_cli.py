"""``sqale-desktop`` run the way a user runs it: a child ``python -m sqale_desktop`` from the repository
(and, for scripts that drive the app, any child ``python`` run the same way)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.helpers import REPO_ROOT


def run_cli(*args: str, timeout: float = 120, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """The finished process with its text output; ``kwargs`` go to ``subprocess.run`` (stdout=, env=)."""
    return run_python("-m", "sqale_desktop", *args, timeout=timeout, **kwargs)


def run_python(*argv: str, timeout: float = 120, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``python argv…`` from the repository, finished, with its text output (as :func:`run_cli`)."""
    options: dict[str, Any] = {"capture_output": True, "cwd": REPO_ROOT, **kwargs}  # cwd=: another folder
    if "stdout" in kwargs or "stderr" in kwargs:
        options.pop("capture_output")
    return subprocess.run([sys.executable, *argv], text=True, timeout=timeout, **options)
