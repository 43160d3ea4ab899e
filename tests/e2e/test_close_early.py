"""Closing the window while the launch is still opening tabs leaves no noise on the terminal.

Issue 20, item 14: closing ~2 s after launch printed "Error calling Python override of
QRunnable::run(): RuntimeError: Signal source has been deleted": the demo's preparation ended after
the window had shut its pool down, its reply started a new job on that pool, and the job ran while
the interpreter was deleting the objects it reported to.  The app is started as ``run_app`` in a
child process (the terminal is what a person sees) and closed at several points of the launch.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys
    from PySide6.QtCore import QTimer
    from sqale_desktop.ui.app import create_application, run_app
    from sqale_desktop.ui.main_window import MainWindow

    app = create_application(["sqale-desktop"])

    def close_when_shown():
        shown = [w for w in app.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
        if shown:
            shown[0].close()  # what the window's close button does
        else:
            QTimer.singleShot(1, close_when_shown)

    QTimer.singleShot(int(sys.argv[1]), close_when_shown)
    sys.exit(run_app())
    """
)


@pytest.mark.parametrize("after_ms", [0, 5, 20, 60])
def test_closing_during_the_launch_is_quiet(tmp_path: Path, after_ms: int) -> None:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", SQALE_DESKTOP_HOME=str(tmp_path / "home"))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(after_ms)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    noise = [line for line in done.stderr.splitlines() if "propagateSizeHints" not in line]
    assert done.returncode == 0, done.stderr
    assert noise == []
