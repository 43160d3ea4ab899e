"""The converter's child processes start through the app's entry point, frozen or not."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sqale_desktop.core.models.convert import child


def test_from_a_checkout_the_child_is_python_m_sqale_desktop() -> None:
    cmd = child.child_command("sqale_desktop.core.models.convert.verify", "x.gguf", "4")
    assert cmd == [
        sys.executable,
        "-m",
        "sqale_desktop",
        "--child-module",
        "sqale_desktop.core.models.convert.verify",
        "x.gguf",
        "4",
    ]


def test_in_a_frozen_build_the_child_is_the_app_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/sqale-desktop/sqale-desktop")
    cmd = child.child_command("sqale_desktop.core.models.convert.quantize", "a", "b", "Q8_0", "1")
    assert cmd == [
        "/opt/sqale-desktop/sqale-desktop",
        "--child-module",
        "sqale_desktop.core.models.convert.quantize",
        "a",
        "b",
        "Q8_0",
        "1",
    ]
    assert child.child_env().get("PYTHONPATH") == __import__("os").environ.get("PYTHONPATH")


def test_only_the_converter_steps_can_be_started() -> None:
    for argv in ([], ["os"], ["sqale_desktop.cli"], ["sqale_desktop.core.models.convert.errors"]):
        assert child.run_child(argv) == 2, argv


def test_the_child_route_runs_a_real_step_and_reports_failure() -> None:
    """verify's child on a file that is not a GGUF: a non-zero exit, through the hidden flag."""
    done = subprocess.run(
        [*child.child_command("sqale_desktop.core.models.convert.verify", "/nonexistent.gguf", "1")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=child.child_env(),
    )
    assert done.returncode != 0
    assert "usage:" not in done.stderr  # reached the step, not argparse
