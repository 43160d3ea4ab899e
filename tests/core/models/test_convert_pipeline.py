"""End to end: tiny checkpoint -> GGUF -> quantized -> loaded by llama.cpp -> registered.

Also what must never happen: a cancelled, failed or space-starved conversion leaving a file or a
registry entry behind.
"""

from __future__ import annotations

import threading
from collections import namedtuple
from pathlib import Path

import pytest

from sqale_desktop.core.models.convert import (
    ConversionCancelled,
    ConvertOptions,
    ConvertProgress,
    VerificationFailed,
    convert_model,
)
from sqale_desktop.core.models.convert import pipeline as pipeline_module
from sqale_desktop.core.models.convert.tiny_checkpoint import TinyDims, write_tiny_checkpoint
from sqale_desktop.core.models.errors import NotEnoughDiskSpace
from sqale_desktop.core.models.registry import Registry

# Rows of 256 so the K-quant kernels themselves run (narrower rows fall back to other types).
DIMS = TinyDims(hidden=256, ffn=512)
Usage = namedtuple("Usage", "total used free")


@pytest.fixture(scope="module")
def with_mtp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny-mtp", dims=DIMS, with_mtp=True)


@pytest.fixture(scope="module")
def without_mtp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny-nomtp", dims=DIMS, with_mtp=False)


def _options(tmp_path: Path, **kw: object) -> ConvertOptions:
    return ConvertOptions(output_dir=tmp_path / "models", work_dir=tmp_path / "work", threads=2, **kw)  # type: ignore[arg-type]


def _leftovers(tmp_path: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())


@pytest.mark.slow
@pytest.mark.parametrize(("fixture", "quant"), [("with_mtp", "Q4_K_M"), ("without_mtp", "Q8_0")])
def test_converts_quantizes_loads_and_registers(
    fixture: str, quant: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    checkpoint: Path = request.getfixturevalue(fixture)
    events: list[ConvertProgress] = []
    result = convert_model(checkpoint, _options(tmp_path, quant=quant), progress=events.append)

    assert result.path.is_file() and result.path.name == f"{checkpoint.name}-{quant}.gguf"
    assert result.mtp_written == (fixture == "with_mtp")
    assert result.verify.architecture == "qwen35" and len(result.verify.generated) == 4
    record = Registry().get(result.record.id if result.record else "")
    assert Path(record.path) == result.path.resolve() and record.size == result.path.stat().st_size
    assert set(record.extras) == {"generation_config.json"}
    assert Path(record.extras["generation_config.json"]).is_file()
    # The intermediate is gone; only the model and its extras remain.
    assert _leftovers(tmp_path) == sorted(
        [f"models/{result.path.name}", f"models/{result.path.stem}.extras/generation_config.json"]
    )
    phases = [e.phase for e in events]
    assert phases.index("convert") < phases.index("quantize") < phases.index("verify") < phases.index("done")
    converted = [e for e in events if e.phase == "convert"]
    assert converted[-1].done == converted[-1].total == result.tensors

    import llama_cpp

    llm = llama_cpp.Llama(str(result.path), n_ctx=128, n_threads=1, verbose=False)
    ftype = {"Q4_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M, "Q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0}[quant]
    assert llm.metadata["general.file_type"] == str(ftype)
    out = llm.create_completion("SELECT", max_tokens=3, temperature=0.0)
    assert out["usage"]["completion_tokens"] >= 1


def test_cancel_during_conversion_leaves_nothing(with_mtp: Path, tmp_path: Path) -> None:
    cancel = threading.Event()

    def progress(p: ConvertProgress) -> None:
        if p.phase == "convert" and p.done == 10:
            cancel.set()

    with pytest.raises(ConversionCancelled):
        convert_model(with_mtp, _options(tmp_path), progress=progress, cancel=cancel)
    assert _leftovers(tmp_path) == []
    assert Registry().list() == []


@pytest.mark.slow
def test_cancel_during_quantization_leaves_nothing(with_mtp: Path, tmp_path: Path) -> None:
    cancel = threading.Event()

    def progress(p: ConvertProgress) -> None:
        if p.phase == "quantize":
            cancel.set()

    with pytest.raises(ConversionCancelled):
        convert_model(with_mtp, _options(tmp_path), progress=progress, cancel=cancel)
    assert _leftovers(tmp_path) == []
    assert Registry().list() == []


def test_failed_verification_leaves_nothing(
    without_mtp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: Path, n_tokens: int = 4) -> None:
        assert path.is_file()  # it runs on the finished quantized file...
        raise VerificationFailed("the converted model does not load")

    monkeypatch.setattr(pipeline_module, "verify_gguf", broken)
    with pytest.raises(VerificationFailed):
        convert_model(without_mtp, _options(tmp_path, quant="Q8_0"))
    assert _leftovers(tmp_path) == []  # ...which is then removed
    assert Registry().list() == []


def test_not_enough_space_is_refused_before_writing(without_mtp: Path, tmp_path: Path) -> None:
    opts = _options(tmp_path, disk_usage=lambda _p: Usage(10**12, 10**12 - 1000, 1000))
    with pytest.raises(NotEnoughDiskSpace, match="free"):
        convert_model(without_mtp, opts)
    assert _leftovers(tmp_path) == []


def test_space_is_summed_per_disk(tmp_path: Path) -> None:
    def usage(_path: str) -> Usage:
        return Usage(10**6, 10**6 - 1000, 1000)

    pipeline_module.check_space({tmp_path / "work": 600}, 0, usage)
    # Intermediate and result on the same disk: 1200 bytes do not fit in 1000.
    with pytest.raises(NotEnoughDiskSpace):
        pipeline_module.check_space({tmp_path / "work": 600, tmp_path / "models": 600}, 0, usage)
