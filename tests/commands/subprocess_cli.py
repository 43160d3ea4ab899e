"""``sqale-desktop`` run the way a user runs it: a child ``python -m sqale_desktop`` from the repository."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.conftest import REPO_ROOT


def run_cli(*args: str, timeout: float = 120, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """The finished process with its text output; ``kwargs`` go to ``subprocess.run`` (stdout=, env=)."""
    options: dict[str, Any] = {"capture_output": True, **kwargs}
    if "stdout" in kwargs or "stderr" in kwargs:
        options.pop("capture_output")
    return subprocess.run(
        [sys.executable, "-m", "sqale_desktop", *args], text=True, cwd=REPO_ROOT, timeout=timeout, **options
    )
