"""The local model registry: import (GGUF magic), ids, remove, verify, persistence."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from sqale_desktop.core import paths
from sqale_desktop.core.models.errors import InvalidModelFile, ModelError, UnknownModel
from sqale_desktop.core.models.files import git_blob_sha1, is_gguf
from sqale_desktop.core.models.registry import Registry, registry_path, slug_for
from tests.helpers import EMPTY_GGUF_HEADER as EMPTY_HEADER
from tests.helpers import join_within
from tests.helpers import smollm2_gguf as smollm2


def fake_gguf(tmp_path: Path, name: str = "My Model-Q4_K_M.gguf", body: bytes = b"x" * 1000) -> Path:
    path = tmp_path / name
    path.write_bytes(EMPTY_HEADER + body)
    return path


def test_import_real_gguf_registers_where_it_lies(isolated_home: Path) -> None:
    model = smollm2()
    record = Registry().import_file(model, source_checkpoint="trl-lab/qwen3.5-2b-grpo-synsql")
    assert record.id == "smollm2-135m-instruct.q4_1"
    assert record.path == str(model.resolve())
    assert record.size == model.stat().st_size
    assert record.origin == "import"
    assert registry_path().parent == paths.data_dir()
    assert str(registry_path()).startswith(str(isolated_home))
    assert Registry().get(record.id) == record  # persisted, read back by a new instance
    assert record.model_dir == model.resolve().parent  # no extras: the GGUF's own folder


def test_import_rejects_non_gguf(tmp_path: Path) -> None:
    not_model = tmp_path / "weights.safetensors"
    not_model.write_bytes(b"\x08\x00\x00\x00{}")
    with pytest.raises(InvalidModelFile, match="not a GGUF"):
        Registry().import_file(not_model)
    with pytest.raises(InvalidModelFile, match="No such file"):
        Registry().import_file(tmp_path / "missing.gguf")
    assert Registry().list() == []


def test_import_twice_is_idempotent_and_ids_are_unique(tmp_path: Path) -> None:
    registry = Registry()
    a = registry.import_file(fake_gguf(tmp_path))
    assert registry.import_file(fake_gguf(tmp_path)).id == a.id
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    b = registry.import_file(fake_gguf(other_dir, body=b"y" * 10))
    assert a.id == "my-model-q4_k_m" and b.id == "my-model-q4_k_m-2"
    assert [r.id for r in registry.list()] == [a.id, b.id]


def test_sha256_matches_hashlib(tmp_path: Path) -> None:
    path = fake_gguf(tmp_path)
    record = Registry().import_file(path)
    assert record.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_verify_detects_rot_and_missing_file(tmp_path: Path) -> None:
    registry = Registry()
    path = fake_gguf(tmp_path)
    record = registry.import_file(path)
    assert registry.verify(record.id).ok
    data = bytearray(path.read_bytes())
    data[500] ^= 1
    path.write_bytes(bytes(data))
    result = registry.verify(record.id)
    assert not result.ok and "mismatch" in result.message
    path.unlink()
    assert "missing" in registry.verify(record.id).message


def test_remove_keeps_file_and_unknown_id_is_clear(tmp_path: Path) -> None:
    registry = Registry()
    path = fake_gguf(tmp_path)
    record = registry.import_file(path)
    registry.remove(record.id)
    assert path.exists()
    assert registry.list() == []
    with pytest.raises(UnknownModel, match=record.id):
        registry.remove(record.id)
    with pytest.raises(UnknownModel):
        registry.get("nope")


def test_damaged_registry_file_gives_clear_error() -> None:
    registry_path().write_text("{not json")
    with pytest.raises(ModelError, match="damaged"):
        Registry().list()


def test_unknown_record_fields_are_tolerated(tmp_path: Path) -> None:
    record = Registry().import_file(fake_gguf(tmp_path))
    data = json.loads(registry_path().read_text())
    data["models"][0]["from_a_newer_version"] = 1
    registry_path().write_text(json.dumps(data))
    assert Registry().get(record.id).sha256 == record.sha256


def test_slug_and_magic_helpers(tmp_path: Path) -> None:
    assert slug_for("Qwen3.5 2B/Q4_K_M.GGUF") == "q4_k_m"
    assert slug_for("Qwen3.5-2B SQaLe-Q4_K_M.gguf") == "qwen3.5-2b-sqale-q4_k_m"
    assert slug_for("..gguf") == "model"
    assert is_gguf(fake_gguf(tmp_path))
    assert not is_gguf(tmp_path / "missing")
    blob = tmp_path / "readme"
    blob.write_bytes(b"hello\n")
    assert git_blob_sha1(blob) == "ce013625030ba8dba906f756967f9e9ca394464a"  # `git hash-object`


def test_concurrent_adds_from_threads_lose_nothing(tmp_path: Path) -> None:
    import threading

    files = [fake_gguf(tmp_path, f"m{i}.gguf", body=bytes([i]) * 10) for i in range(16)]
    barrier = threading.Barrier(8, timeout=60)

    def work(chunk: list[Path]) -> None:
        barrier.wait()
        for path in chunk:
            Registry().import_file(path)  # a separate instance per call, as separate workers have

    threads = [threading.Thread(target=work, args=(files[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    join_within(*threads)
    assert sorted(r.id for r in Registry().list()) == sorted(f"m{i}" for i in range(16))


def test_usable_prefers_the_chosen_model_and_skips_missing_files(tmp_path: Path) -> None:
    registry = Registry()
    assert registry.usable() is None
    first = registry.import_file(fake_gguf(tmp_path, "first.gguf", b"a" * 100))
    second = registry.import_file(fake_gguf(tmp_path, "second.gguf", b"b" * 100))
    assert registry.usable() == first  # nothing chosen: the oldest
    assert registry.usable(second.id) == second
    assert registry.usable("no-such-id") == first
    Path(second.path).unlink()
    assert registry.usable(second.id) == first  # the chosen file is gone: fall back
    Path(first.path).unlink()
    assert registry.usable(second.id) is None


@pytest.mark.parametrize(
    "raw",
    [b'{"version": 1, "models": [{"id": "\xff"}]}', b"[" * 100_000 + b"]" * 100_000],
    ids=["invalid-utf8", "nested-deep"],
)
def test_an_unreadable_registry_file_gives_clear_error(raw: bytes) -> None:
    registry_path().write_bytes(raw)
    with pytest.raises(ModelError, match="damaged"):
        Registry().list()


@pytest.mark.parametrize(
    ("field", "bad"), [("size", "big"), ("size", True), ("path", 3), ("extras", [1]), ("mtime", "x")]
)
def test_a_record_of_the_wrong_shape_gives_clear_error(tmp_path: Path, field: str, bad: object) -> None:
    record = Registry().import_file(fake_gguf(tmp_path))
    data = json.loads(registry_path().read_text())
    data["models"][0][field] = bad
    registry_path().write_text(json.dumps(data))
    with pytest.raises(ModelError, match=f"damaged .*{field}"):
        Registry().get(record.id)


def test_models_list_says_the_registry_is_damaged(capsys: pytest.CaptureFixture[str]) -> None:
    from sqale_desktop import cli

    registry_path().parent.mkdir(parents=True, exist_ok=True)
    registry_path().write_text(
        '{"version": 1, "models": [{"id": "m", "path": "/m.gguf", "sha256": "0", '
        '"size": "big", "origin": "import"}]}'
    )
    assert cli.main(["models", "list"]) == 1
    err = capsys.readouterr().err
    assert "damaged" in err and "size" in err and "Traceback" not in err
