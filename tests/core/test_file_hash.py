"""The one block-wise file hasher: the digest hashlib gives, progress to the end, a Stop heard."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from sqale_desktop.core import file_hash
from sqale_desktop.core.errors import Cancelled, is_known


def test_the_digest_and_progress_cover_every_block(tmp_path: Path) -> None:
    data = bytes(range(256)) * (file_hash.BLOCK // 256 * 2 + 3)  # two whole blocks and a bit
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    seen: list[tuple[int, int]] = []
    assert file_hash.sha256_file(path, lambda done, total: seen.append((done, total))) == (
        hashlib.sha256(data).hexdigest()
    )
    assert [done for done, _ in seen] == [file_hash.BLOCK, 2 * file_hash.BLOCK, len(data)]
    assert {total for _, total in seen} == {len(data)}
    blob = hashlib.sha1(f"blob {len(data)}\0".encode(), usedforsecurity=False)
    assert file_hash.hash_file(blob, path) == hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()


def test_a_set_cancel_stops_before_the_next_block(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * (file_hash.BLOCK * 3))
    cancel = threading.Event()
    seen: list[int] = []

    def progress(done: int, total: int) -> None:
        seen.append(done)
        cancel.set()

    with pytest.raises(Cancelled, match=r"f\.bin") as raised:
        file_hash.sha256_file(path, progress, cancel)
    assert seen == [file_hash.BLOCK] and is_known(raised.value)


def test_an_unreadable_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        file_hash.sha256_file(tmp_path / "missing.gguf")
