"""The registry under pressure: parallel processes writing it, and files changed behind its back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sqale_desktop.core.models.registry import ModelChanged, Registry
from tests.helpers import EMPTY_GGUF_HEADER as EMPTY_HEADER

REPO_ROOT = Path(__file__).resolve().parents[3]

WRITER = r"""
import sys
from pathlib import Path
from sqale_desktop.core.models.registry import Registry
registry_file, folder, worker, count = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
sys.stdin.readline()  # start together
for i in range(count):
    path = folder / f"w{worker}-{i}.gguf"
    path.write_bytes(b"GGUF\x03" + bytes(19) + f"{worker}-{i}".encode() * 10)  # an empty GGUF v3 header
    Registry(registry_file).import_file(path)
"""


def test_parallel_processes_lose_no_entry(tmp_path: Path) -> None:
    registry_file = tmp_path / "home" / "models.json"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(registry_file), str(tmp_path), str(n), "25"],
            stdin=subprocess.PIPE,
            env=env,
            text=True,
        )
        for n in range(4)
    ]
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    for worker in workers:
        assert worker.wait(timeout=120) == 0
    ids = sorted(r.id for r in Registry(registry_file).list())
    assert ids == sorted(f"w{n}-{i}" for n in range(4) for i in range(25))


def _registered(tmp_path: Path) -> tuple[Registry, Path]:
    path = tmp_path / "model.gguf"
    path.write_bytes(EMPTY_HEADER + b"a" * 980)  # 1,004 bytes
    registry = Registry()
    record = registry.import_file(path)
    assert record.mtime == path.stat().st_mtime
    return registry, path


def test_a_file_modified_after_registration_is_refused(tmp_path: Path) -> None:
    registry, path = _registered(tmp_path)
    assert registry.usable() is not None
    stat = path.stat()
    path.write_bytes(EMPTY_HEADER + b"b" * 980)  # same size, other content
    os.utime(path, (stat.st_atime, stat.st_mtime + 10))
    with pytest.raises(ModelChanged, match="modified after it was registered: its sha256 is now"):
        registry.usable()
    path.write_bytes(b"GGUF" + b"b" * 10)
    with pytest.raises(ModelChanged, match="its size is now 14 bytes, not 1,004"):
        registry.usable()


def test_a_touched_but_unchanged_file_is_hashed_once_and_accepted(tmp_path: Path) -> None:
    registry, path = _registered(tmp_path)
    stat = path.stat()
    os.utime(path, (stat.st_atime, stat.st_mtime + 10))
    record = registry.usable()
    assert record is not None and record.mtime == stat.st_mtime + 10
    assert registry.get(record.id).mtime == stat.st_mtime + 10  # recorded: no second hash
