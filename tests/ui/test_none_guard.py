"""The PySide6 6.12.0 singleton-refcount workaround keeps long sessions alive (see ui/_none_guard.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import os, sys
os.environ["QT_QPA_PLATFORM"] = "offscreen"
sys.path.insert(0, sys.argv[1])
import sqale_desktop.ui  # applies the guard
from PySide6.QtWidgets import QApplication, QLabel
app = QApplication([])
label = QLabel()
for i in range(50_000):  # far more calls than None/False have references in a fresh interpreter
    label.setText("x")
    label.isVisible()
    app.processEvents()
print("alive", sqale_desktop.ui.NONE_GUARDED)
"""


def test_fifty_thousand_void_calls_do_not_abort_the_interpreter() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("alive")
