"""GPU offload report: asks the installed llama.cpp build, says how to get a GPU build."""

from __future__ import annotations

import sys

import pytest

from sqale_desktop.core.models import gpu


def test_report_matches_the_installed_build() -> None:
    import llama_cpp

    report = gpu.gpu_offload()
    assert report.supported == bool(llama_cpp.llama_supports_gpu_offload())
    if not report.supported:
        assert "CMAKE_ARGS" in report.message


def test_missing_llama_cpp_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import now raises ImportError
    report = gpu.gpu_offload()
    assert not report.supported and "could not be loaded" in report.message
