"""Downloads against a fake hub on 127.0.0.1: normal, dropped and resumed, corrupted, stalled,
gated, disk full.  huggingface_hub is used for real (never mocked); only the server is fake."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections import namedtuple
from pathlib import Path

import pytest

from sqale_desktop.core.models import download as dl
from sqale_desktop.core.models import hubcache
from sqale_desktop.core.models.errors import (
    AuthRequired,
    ChecksumMismatch,
    DownloadCancelled,
    DownloadStalled,
    HubUnavailable,
    InvalidModelFile,
    ModelError,
    NotEnoughDiskSpace,
)
from sqale_desktop.core.models.registry import Registry
from tests.core.models.fakehub import FakeHub, FakeRepo
from tests.helpers import readline_within

GGUF_REPO = "someone/qwen3.5-2b-grpo-synsql-GGUF"
CHECKPOINT = "trl-lab/qwen3.5-2b-grpo-synsql"
FILE = "qwen3.5-2b-grpo-synsql-Q4_K_M.gguf"
FAST = dl.DownloadOptions(
    retries=3, backoff_s=0.01, max_backoff_s=0.05, stall_timeout_s=0.5, connect_timeout_s=2, chunk_size=16384
)


def payload(size: int = 300_000) -> bytes:
    return b"GGUF" + os.urandom(size - 4)


@pytest.fixture
def repos(fake_hub: FakeHub) -> tuple[FakeRepo, FakeRepo]:
    gguf = fake_hub.add(
        FakeRepo(
            GGUF_REPO,
            {FILE: payload(), "README.md": b"# quants\n"},
            lfs={FILE},
            tags=["gguf"],
            base_model=CHECKPOINT,
        )
    )
    ckpt = fake_hub.add(
        FakeRepo(
            CHECKPOINT,
            {"sqale_agent.py": b"SYSTEM_PROMPT = 'x'\n", "generation_config.json": b'{"temperature": 0.6}'},
            commit="fedcba9876543210fedcba9876543210fedcba98",
        )
    )
    return gguf, ckpt


def test_normal_download_lands_in_hub_cache_and_registry(
    repos: tuple[FakeRepo, FakeRepo], hf_env: Path, fake_hub: FakeHub
) -> None:
    from huggingface_hub import try_to_load_from_cache

    gguf, _ = repos
    seen: list[dl.Progress] = []
    result = dl.download_model(GGUF_REPO, FILE, progress=seen.append, options=FAST)
    record = result.record
    assert record.sha256 == gguf.sha256(FILE)
    assert record.source_checkpoint == CHECKPOINT  # read from the GGUF repo's card
    assert Path(record.path).read_bytes() == gguf.files[FILE]
    # the library itself finds the file in its standard cache: shared with other tools
    assert try_to_load_from_cache(GGUF_REPO, FILE) == record.path
    assert set(record.extras) == {"sqale_agent.py", "generation_config.json"}
    assert Path(record.extras["sqale_agent.py"]).read_text().startswith("SYSTEM_PROMPT")
    # the agent reads both extras from one folder
    assert (record.model_dir / "generation_config.json").read_text() == '{"temperature": 0.6}'
    assert (record.model_dir / "sqale_agent.py").is_file()
    assert Registry().get(record.id) == record
    downloads = [p for p in seen if p.phase == "download"]
    assert downloads and downloads[-1].done == downloads[-1].total == len(gguf.files[FILE])
    assert all(p.speed_bps > 0 for p in downloads)
    assert {p.phase for p in seen} >= {"metadata", "download", "verify", "done"}
    assert not list(hf_env.rglob("*.incomplete"))


def test_dropped_connection_resumes_with_range(repos: tuple[FakeRepo, FakeRepo], fake_hub: FakeHub) -> None:
    gguf, _ = repos
    fake_hub.faults.drop_after = 100_000
    fake_hub.faults.drops = 2
    record = dl.download_model(GGUF_REPO, FILE, options=FAST).record
    assert Path(record.path).read_bytes() == gguf.files[FILE]
    ranges = [r.headers.get("range") for r in fake_hub.requests("cdn", "GET")]
    assert ranges[0] is None and len(ranges) == 3
    # each retry asks for the rest, from what was written to disk before the drop (httpx hands
    # out whole chunks, so a few bytes short of the drop point at most)
    first, second = (int(r.removeprefix("bytes=").removesuffix("-")) for r in ranges[1:])
    assert 100_000 - FAST.chunk_size < first <= 100_000
    assert first + 100_000 - FAST.chunk_size < second <= first + 100_000


def test_resume_after_restart_uses_partial_file(
    repos: tuple[FakeRepo, FakeRepo], fake_hub: FakeHub, hf_env: Path
) -> None:
    """A first run is killed mid-file (simulated by a BaseException from the progress hook, which
    nothing in the download path catches); a second run fetches only the rest."""
    gguf, _ = repos

    class Killed(BaseException):
        pass

    def kill(p: dl.Progress) -> None:
        if p.phase == "download" and p.done > 0:
            raise Killed

    with pytest.raises(Killed):
        dl.download_model(GGUF_REPO, FILE, options=FAST, progress=kill)
    partials = list(hf_env.rglob("*" + hubcache.PARTIAL_SUFFIX))
    assert len(partials) == 1
    kept = partials[0].stat().st_size
    assert 0 < kept < len(gguf.files[FILE])
    assert Registry().list() == []
    record = dl.download_model(GGUF_REPO, FILE, options=FAST).record
    assert Path(record.path).read_bytes() == gguf.files[FILE]
    assert fake_hub.requests("cdn", "GET")[-1].headers.get("range") == f"bytes={kept}-"


def test_server_errors_are_retried_with_back_off(repos: tuple[FakeRepo, FakeRepo], fake_hub: FakeHub) -> None:
    gguf, _ = repos
    fake_hub.faults.failures = 3
    record = dl.download_model(GGUF_REPO, FILE, options=FAST).record
    assert Path(record.path).read_bytes() == gguf.files[FILE]
    assert len(fake_hub.requests("cdn", "GET")) == 4


def test_persistent_server_errors_give_up_with_a_clear_message(
    repos: tuple[FakeRepo, FakeRepo], fake_hub: FakeHub
) -> None:
    fake_hub.faults.failures = 100
    with pytest.raises(HubUnavailable, match=r"failed 4 times.*HTTP 503"):
        dl.download_model(GGUF_REPO, FILE, options=FAST)
    assert len(fake_hub.requests("cdn", "GET")) == FAST.retries + 1
    assert Registry().list() == []


def test_server_ignoring_range_restarts_cleanly(repos: tuple[FakeRepo, FakeRepo], fake_hub: FakeHub) -> None:
    gguf, _ = repos
    fake_hub.faults.drop_after = 50_000
    fake_hub.faults.ignore_range = True
    record = dl.download_model(GGUF_REPO, FILE, options=FAST).record
    assert Path(record.path).read_bytes() == gguf.files[FILE]


def test_corrupted_byte_is_caught_and_never_registered(
    repos: tuple[FakeRepo, FakeRepo], fake_hub: FakeHub, hf_env: Path
) -> None:
    from huggingface_hub import try_to_load_from_cache

    fake_hub.faults.corrupt_at = 12345
    with pytest.raises(ChecksumMismatch, match="not registered"):
        dl.download_model(GGUF_REPO, FILE, options=FAST)
    assert Registry().list() == []
    assert try_to_load_from_cache(GGUF_REPO, FILE) is None
    assert not [p for p in hf_env.rglob("*") if p.is_file() and p.stat().st_size > 1000]


def test_stalled_server_is_detected(repos: tuple[FakeRepo, FakeRepo], fake_hub: FakeHub) -> None:
    fake_hub.faults.stall_after = 64_000
    seen: list[dl.Progress] = []
    options = dl.DownloadOptions(retries=1, backoff_s=0.01, stall_timeout_s=0.3, chunk_size=16384)
    with pytest.raises(DownloadStalled, match="stalled"):
        dl.download_model(GGUF_REPO, FILE, options=options, progress=seen.append)
    assert any(p.stalled for p in seen)
    assert Registry().list() == []


def test_gated_repo_asks_for_a_token_and_works_with_one(
    repos: tuple[FakeRepo, FakeRepo], fake_hub: FakeHub
) -> None:
    gguf, _ = repos
    gguf.gated_token = "hf_GATEDSECRET123"
    with pytest.raises(AuthRequired, match="token") as info:
        dl.download_model(GGUF_REPO, FILE, options=FAST)
    assert "Settings" in str(info.value)
    with pytest.raises(AuthRequired):
        dl.download_model(GGUF_REPO, FILE, token="hf_wrong", options=FAST)
    record = dl.download_model(GGUF_REPO, FILE, token="hf_GATEDSECRET123", options=FAST).record
    assert record.sha256 == gguf.sha256(FILE)
    # the token goes to the hub, never to the CDN the hub redirects to
    cdn = fake_hub.requests("cdn", "GET")
    assert cdn and all("authorization" not in r.headers for r in cdn)
    assert any("authorization" in r.headers for r in fake_hub.requests("hub"))


def test_cancel_keeps_partial_for_resume(repos: tuple[FakeRepo, FakeRepo], hf_env: Path) -> None:
    cancel = threading.Event()

    def stop_at_first_report(p: dl.Progress) -> None:
        if p.phase == "download":
            cancel.set()

    with pytest.raises(DownloadCancelled, match="resumes"):
        dl.download_model(GGUF_REPO, FILE, options=FAST, progress=stop_at_first_report, cancel=cancel)
    partial = next(hf_env.rglob("*" + hubcache.PARTIAL_SUFFIX))
    assert 0 < partial.stat().st_size < 300_000
    assert Registry().list() == []


DiskUsage = namedtuple("DiskUsage", "total used free")


def test_free_space_is_checked_before_starting(repos: tuple[FakeRepo, FakeRepo], fake_hub: FakeHub) -> None:
    """Simulated with an injected disk_usage: the check happens before any byte is fetched."""
    options = dl.DownloadOptions(disk_usage=lambda _path: DiskUsage(10**9, 10**9, 1000))
    with pytest.raises(NotEnoughDiskSpace, match="disk space"):
        dl.download_model(GGUF_REPO, FILE, options=options)
    assert fake_hub.requests("cdn") == []
    assert Registry().list() == []


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Path:
    """A real 256 KiB filesystem; needs root (mount), skipped where the sandbox forbids it."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount_point)],
        capture_output=True,
        timeout=120,
    )
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root?)")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=True, timeout=120)


def test_disk_full_mid_download_gives_message_and_registers_nothing(
    repos: tuple[FakeRepo, FakeRepo], tiny_tmpfs: Path
) -> None:
    """A real ENOSPC: the free-space check is told there is room, the 256 KiB disk says otherwise."""
    options = dl.DownloadOptions(
        backoff_s=0.01, chunk_size=16384, disk_usage=lambda _path: DiskUsage(10**12, 0, 10**12)
    )
    with pytest.raises(NotEnoughDiskSpace, match="filled up"):
        dl.download_model(GGUF_REPO, FILE, options=options, cache_dir=tiny_tmpfs)
    assert Registry().list() == []
    left = [p for p in tiny_tmpfs.rglob("*") if p.is_file() and ".locks" not in p.parts]
    assert left == []  # (an empty lock file stays, as huggingface_hub leaves its own)


def test_file_already_in_hub_cache_is_verified_not_downloaded_again(
    repos: tuple[FakeRepo, FakeRepo], fake_hub: FakeHub, hf_env: Path
) -> None:
    gguf, _ = repos
    first = dl.download_model(GGUF_REPO, FILE, options=FAST).record
    Registry().remove(first.id)
    gets = len(fake_hub.requests("cdn", "GET"))
    again = dl.download_model(GGUF_REPO, FILE, options=FAST).record
    assert again.path == first.path and again.sha256 == gguf.sha256(FILE)
    # a new commit with the same content: the blob is linked, not fetched
    gguf.commit = "1" * 40
    moved = dl.download_model(GGUF_REPO, FILE, options=FAST).record
    assert ("1" * 40) in moved.path and Path(moved.path).read_bytes() == gguf.files[FILE]
    assert len(fake_hub.requests("cdn", "GET")) == gets
    # a damaged cached copy is refused, not registered
    blob = Path(moved.path).resolve()
    blob.write_bytes(b"GGUF" + b"\0" * 10)
    Registry().remove(moved.id)
    with pytest.raises(ChecksumMismatch, match="damaged"):
        dl.download_model(GGUF_REPO, FILE, options=FAST)


def test_second_download_of_the_same_file_at_once_is_refused(
    repos: tuple[FakeRepo, FakeRepo], fake_hub: FakeHub, hf_env: Path
) -> None:
    """Another process (here: another flock holder) downloading the same blob: no shared partial."""
    from filelock import FileLock

    gguf, _ = repos
    folder = "models--" + GGUF_REPO.replace("/", "--")
    lock_path = hf_env / ".locks" / folder / f"{gguf.sha256(FILE)}.lock"
    lock_path.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, filelock; lock = filelock.FileLock(sys.argv[1]); lock.acquire(); "
            "print('held', flush=True); sys.stdin.read()",
            str(lock_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and readline_within(holder.stdout).strip() == "held"
        with pytest.raises(ModelError, match="already being downloaded"):
            dl.download_model(GGUF_REPO, FILE, options=FAST)
    finally:
        holder.communicate("", timeout=10)
    assert fake_hub.requests("cdn") == []
    record = dl.download_model(GGUF_REPO, FILE, options=FAST).record
    assert FileLock(str(lock_path)).acquire(timeout=1)  # released afterwards
    assert record.sha256 == gguf.sha256(FILE)


def test_only_gguf_files_are_registered(repos: tuple[FakeRepo, FakeRepo], fake_hub: FakeHub) -> None:
    gguf, _ = repos
    with pytest.raises(InvalidModelFile, match="not a GGUF"):
        dl.download_model(GGUF_REPO, "README.md", options=FAST)
    gguf.files["fake.gguf"] = b"PK\x03\x04 a zip, not a model" * 100
    gguf.lfs.add("fake.gguf")
    with pytest.raises(InvalidModelFile, match="does not start with 'GGUF'"):
        dl.download_model(GGUF_REPO, "fake.gguf", options=FAST)
    assert Registry().list() == []
