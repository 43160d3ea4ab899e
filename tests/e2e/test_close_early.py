"""Closing the window while the launch is still opening tabs leaves no noise on the terminal.

Issue 20, item 14: closing ~2 s after launch printed "Error calling Python override of
QRunnable::run(): RuntimeError: Signal source has been deleted": the demo's preparation ended after
the window had shut its pool down, its reply started a new job on that pool, and the job ran while
the interpreter was deleting the objects it reported to.  The app is started as ``run_app`` in a
child process (the terminal is what a person sees) and closed at several points of the launch.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.e2e.child_app import run_app_script, terminal_noise

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
    done = run_app_script(SCRIPT, str(after_ms), home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert terminal_noise(done) == []
