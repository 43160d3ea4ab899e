"""Child processes (core.child) start through the app's entry point, frozen or not; the kit's
supervisor reports a child's death in words and applies the memory cap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sqale_desktop.core.child import launch as child
from sqale_desktop.core.child import supervise
from sqale_desktop.core.models.convert.errors import VerificationFailed
from sqale_desktop.core.models.convert.verify import verify_gguf


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
    """verify's child on a file that is not a GGUF: an error message, through the hidden flag."""
    with pytest.raises(VerificationFailed, match="does not load or generate") as caught:
        verify_gguf(Path("/nonexistent.gguf"), n_tokens=1, timeout_s=120)
    assert "usage:" not in str(caught.value)  # reached the step, not argparse


def test_the_memory_cap_travels_to_the_child_and_is_applied_there() -> None:
    """RLIMIT_AS from MEMORY_ENV, set by run_child before the module is imported."""
    script = (
        "import resource, sys\n"
        "from sqale_desktop.core.child import launch\n"
        "launch.apply_memory_cap(int(sys.argv[1]))\n"
        "print(resource.getrlimit(resource.RLIMIT_AS)[0])\n"
        "try:\n    bytearray(800 * 1024 * 1024)\nexcept MemoryError:\n    print('MemoryError')\n"
    )
    env = child.child_env(memory_mb=300)
    assert env[child.MEMORY_ENV] == "300"
    done = subprocess.run(
        [sys.executable, "-c", script, "300"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    assert done.stdout.split() == [str(300 * 1024 * 1024), "MemoryError"]
    assert child.MEMORY_ENV not in child.child_env()


def test_a_child_past_its_deadline_is_killed_and_named(tmp_path: Path) -> None:
    """A hang that never answers (a driver stand-in that does not exist here: the probe's child
    waits on nothing) is the caller's deadline, in words, and its temp folder is removed."""
    fifo = tmp_path / "never"
    os.mkfifo(fifo)  # opening a FIFO nobody writes blocks the child forever, in one C call
    with pytest.raises(supervise.ChildTimedOut, match=r"the stand-in ran past its 2 s time limit"):
        supervise.run(
            "sqale_desktop.core.engines.llama.gpu_probe", {"library": str(fifo)}, what="the stand-in",
            total_s=2.0, memory_mb=None, temp_parent=tmp_path,
        )  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["never"]
