"""``sqale-desktop models convert`` from a local folder and from a hub repo (a fake hub on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqale_desktop.cli import main
from sqale_desktop.core.models.convert.tiny_checkpoint import TinyDims, write_tiny_checkpoint
from sqale_desktop.core.models.registry import Registry
from tests.core.models.fakehub import FakeHub, FakeRepo

DIMS = TinyDims()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "qwen3.5-tiny", dims=DIMS, with_mtp=False)


@pytest.mark.slow
def test_cli_converts_a_local_folder_and_registers(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "models",
            "convert",
            str(checkpoint),
            "--quant",
            "Q8_0",
            "--output-dir",
            str(tmp_path),
            "--threads",
            "1",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    path = tmp_path / "qwen3.5-tiny-Q8_0.gguf"
    assert out.startswith(str(path)) and "registered as" in out
    assert [Path(r.path) for r in Registry().list()] == [path.resolve()]
    assert "quantize:" in err and "verify:" in err


def test_cli_reports_a_bad_folder_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    code = main(["models", "convert", str(tmp_path / "empty")])
    _, err = capsys.readouterr()
    assert code == 1
    assert err.startswith("error:") and "config.json" in err and "Traceback" not in err
    assert Registry().list() == []


@pytest.mark.slow
def test_converts_a_checkpoint_downloaded_from_the_hub(
    checkpoint: Path, fake_hub: FakeHub, tmp_path: Path
) -> None:
    files = {p.name: p.read_bytes() for p in checkpoint.iterdir()}
    files["README.md"] = b"# a model card the converter does not need"
    files["stale-consolidated.safetensors"] = b"not listed in the index, never fetched"
    fake_hub.add(
        FakeRepo("trl-lab/qwen3.5-tiny", files, lfs={n for n in files if n.endswith(".safetensors")})
    )
    from sqale_desktop.core.models.convert import ConvertOptions, convert_model

    result = convert_model(
        "trl-lab/qwen3.5-tiny",
        ConvertOptions(quant="Q8_0", output_dir=tmp_path / "models", work_dir=tmp_path / "work", threads=1),
    )
    assert result.record is not None and result.record.source_checkpoint == "trl-lab/qwen3.5-tiny"
    assert result.record.repo == "trl-lab/qwen3.5-tiny" and result.record.origin == "convert"
    assert result.record.revision == FakeRepo("x", {}).commit  # pinned to the listed commit
    assert (result.checkpoint_dir / "config.json").read_bytes() == files["config.json"]
    downloaded = {r.path.rsplit("/", 1)[-1] for r in fake_hub.requests(method="GET") if "/resolve/" in r.path}
    assert {"config.json", "tokenizer.json", "generation_config.json"} <= downloaded
    assert len(fake_hub.requests(server="cdn", method="GET")) == 2  # the two shards the index lists
    assert "README.md" not in downloaded


def test_hub_source_is_refused_when_the_download_does_not_fit(
    checkpoint: Path, fake_hub: FakeHub, tmp_path: Path
) -> None:
    from collections import namedtuple

    from sqale_desktop.core.models.convert import ConvertOptions, convert_model
    from sqale_desktop.core.models.errors import NotEnoughDiskSpace

    files = {p.name: p.read_bytes() for p in checkpoint.iterdir()}
    fake_hub.add(
        FakeRepo("trl-lab/qwen3.5-tiny", files, lfs={n for n in files if n.endswith(".safetensors")})
    )
    usage = namedtuple("usage", "total used free")
    opts = ConvertOptions(work_dir=tmp_path / "work", disk_usage=lambda _p: usage(10**9, 10**9, 10))
    with pytest.raises(NotEnoughDiskSpace):
        convert_model("trl-lab/qwen3.5-tiny", opts)
    assert not any("/resolve/" in r.path for r in fake_hub.requests(method="GET"))


def test_cancel_during_the_download_stops_before_the_weights(
    checkpoint: Path, fake_hub: FakeHub, tmp_path: Path
) -> None:
    import threading

    from sqale_desktop.core.models.convert import (
        ConversionCancelled,
        ConvertOptions,
        ConvertProgress,
        convert_model,
    )

    files = {p.name: p.read_bytes() for p in checkpoint.iterdir()}
    fake_hub.add(
        FakeRepo("trl-lab/qwen3.5-tiny", files, lfs={n for n in files if n.endswith(".safetensors")})
    )
    cancel = threading.Event()

    def progress(p: ConvertProgress) -> None:
        if p.phase == "download" and p.message == "config.json":
            cancel.set()

    opts = ConvertOptions(output_dir=tmp_path / "models", work_dir=tmp_path / "work")
    with pytest.raises(ConversionCancelled):
        convert_model("trl-lab/qwen3.5-tiny", opts, progress=progress, cancel=cancel)
    assert fake_hub.requests(server="cdn") == []  # no shard was fetched
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())
    assert Registry().list() == []
