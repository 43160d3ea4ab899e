"""The app in a child process, for the journeys whose proof is the terminal: a script that starts
``run_app`` (and closes the window at a chosen moment), run with its own settings folder; what is
left on stderr once the offscreen platform's one known line is taken out is what a person sees."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.commands.subprocess_cli import run_python

# The offscreen platform cannot resize native windows to their size hints and says so.
OFFSCREEN_NOISE = "This plugin does not support propagateSizeHints"


def run_app_script(script: str, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """``python -c script args…`` from the repository, offscreen, settings and cache under ``home``."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", SQALE_DESKTOP_HOME=str(home))
    return run_python("-c", script, *args, env=env)


def terminal_noise(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The child's stderr lines, less the offscreen platform's."""
    return [line for line in done.stderr.splitlines() if OFFSCREEN_NOISE not in line]
