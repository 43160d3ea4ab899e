"""The core must import and work with PySide6 absent (napari checks the same with a Qt-less job)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import sqale_desktop.core

CORE = Path(sqale_desktop.core.__file__).parent


def test_no_core_module_mentions_pyside() -> None:
    offenders = [str(p) for p in CORE.rglob("*.py") if "PySide6" in p.read_text(encoding="utf-8")]
    assert offenders == []


def test_every_core_module_and_the_cli_import_with_qt_blocked() -> None:
    script = textwrap.dedent(
        """
        import importlib, pkgutil, sys

        class BlockQt:
            def find_spec(self, name, path=None, target=None):
                if name == "PySide6" or name.startswith("PySide6."):
                    raise ImportError("PySide6 is blocked in this test")
                return None

        sys.meta_path.insert(0, BlockQt())
        import sqale_desktop.core as core
        names = [m.name for m in pkgutil.walk_packages(core.__path__, "sqale_desktop.core.")]
        for name in names:
            importlib.import_module(name)
        import sqale_desktop.cli as cli
        parser = cli.build_parser()
        assert parser.prog == "sqale-desktop"
        assert not any(m.startswith("PySide6") for m in sys.modules), "PySide6 got imported"
        print(len(names))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) >= 5
