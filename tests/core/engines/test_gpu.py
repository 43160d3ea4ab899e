"""GPU offload report: asks the installed llama.cpp build, says how to get a GPU build."""

from __future__ import annotations

import sys

import pytest

from sqale_desktop.core.engines.llama import gpu


def test_report_matches_the_installed_build() -> None:
    import llama_cpp

    report = gpu.gpu_offload()
    assert report.supported == bool(llama_cpp.llama_supports_gpu_offload())
    if not report.supported:
        # A build without a GPU backend says how to get one; the app's build has Vulkan, which
        # finds no GPU on a machine without one (lavapipe is skipped unless asked for).
        from sqale_desktop.core.engines.llama.backends import load_backends

        expected = "finds no GPU" if load_backends().gpu else "CMAKE_ARGS"
        assert expected in report.message


def test_missing_llama_cpp_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import now raises ImportError
    report = gpu.gpu_offload()
    assert not report.supported and "could not be loaded" in report.message
