"""A GPU backend is loaded in a child first (core.engines.llama.gpu_probe): a Vulkan loader that
aborts, segfaults or hangs there means the CPU with the reason, remembered until it changes.

The stand-ins are built here with the system's C compiler: a ``libvulkan.so.1`` whose load-time
code misbehaves, and a ``libggml-vulkan.so`` linked against it, as the real backend is.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sqale_desktop.core.engines.llama import gpu_probe

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

_LOADERS = {
    "abort": "#include <stdlib.h>\n__attribute__((constructor)) static void boom(void) { abort(); }\n",
    "segfault": "__attribute__((constructor)) static void boom(void) { *(volatile int *)0 = 1; }\n",
    "hang": "#include <unistd.h>\n__attribute__((constructor)) static void boom(void) { for (;;) sleep(9);"
    " }\n",
    "fine": "",
}
_ENTRY = "int vkGetInstanceProcAddr(void) { return 0; }\n"  # the symbol the backend links against


def fake_loader(folder: Path, behaviour: str) -> Path:
    """``folder/libvulkan.so.1`` that does ``behaviour`` when loaded."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "loader.c").write_text(_LOADERS[behaviour] + _ENTRY)
    cc = ["cc", "-shared", "-fPIC", "-o"]
    subprocess.run([*cc, str(folder / "libvulkan.so.1"), str(folder / "loader.c")], check=True, timeout=60)
    return folder / "libvulkan.so.1"


def fake_backend(folder: Path, behaviour: str) -> Path:
    """``folder/libggml-vulkan.so``, needing ``folder/libvulkan.so.1`` that does ``behaviour``."""
    fake_loader(folder, behaviour)
    (folder / "backend.c").write_text(
        "int vkGetInstanceProcAddr(void);\nint ggml_probe(void) { return vkGetInstanceProcAddr(); }\n"
    )
    cc = ["cc", "-shared", "-fPIC", "-o"]
    subprocess.run(
        [*cc, str(folder / "libggml-vulkan.so"), str(folder / "backend.c"), f"-L{folder}",
         "-l:libvulkan.so.1", "-Wl,-rpath,$ORIGIN"],
        check=True,
        timeout=60,
    )  # fmt: skip
    return folder / "libggml-vulkan.so"


@pytest.mark.parametrize(("behaviour", "words"), [("abort", "SIGABRT"), ("segfault", "SIGSEGV")])
def test_a_loader_that_crashes_means_the_cpu_with_the_signal(
    tmp_path: Path, behaviour: str, words: str
) -> None:
    library = fake_backend(tmp_path / "lib", behaviour)
    reason = gpu_probe.verdict("Vulkan", library, cache=tmp_path / "probe.json")
    assert reason.startswith("Vulkan: ")  # Backends.gpu_reason picks it for the status line
    assert words in reason and "running on the CPU" in reason


def test_a_loader_that_hangs_means_the_cpu_after_the_deadline(tmp_path: Path) -> None:
    library = fake_backend(tmp_path / "lib", "hang")
    reason = gpu_probe.verdict("Vulkan", library, probe_s=3.0, cache=tmp_path / "probe.json")
    assert reason.startswith("Vulkan: ") and "did not answer within 3 s" in reason


def test_a_loader_that_loads_is_used(tmp_path: Path) -> None:
    library = fake_backend(tmp_path / "lib", "fine")
    assert gpu_probe.verdict("Vulkan", library, cache=tmp_path / "probe.json") == ""


def test_the_verdict_is_remembered_until_the_loader_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    library = fake_backend(tmp_path / "lib", "segfault")
    store = tmp_path / "probe.json"
    first = gpu_probe.verdict("Vulkan", library, cache=store)
    assert "SIGSEGV" in first
    probes: list[Path] = []
    real_probe = gpu_probe.probe

    def counted(display: str, path: Path, *, probe_s: float = gpu_probe.PROBE_S) -> str:
        probes.append(path)
        return real_probe(display, path, probe_s=probe_s)

    monkeypatch.setattr(gpu_probe, "probe", counted)
    assert gpu_probe.verdict("Vulkan", library, cache=store) == first
    assert probes == []  # a later start with the same loader does not load it again
    # The loader is fixed: a new libvulkan.so.1 beside the backend (its rpath) is probed again.
    fake_loader(tmp_path / "lib", "fine")
    assert gpu_probe.verdict("Vulkan", library, cache=store) == ""
    assert probes == [library]
    # An ICD named by the loader's variable is part of what the verdict depends on.
    icd = tmp_path / "icd.json"
    icd.write_text('{"file_format_version": "1.0.0", "ICD": {"library_path": "libvulkan.so.1"}}')
    monkeypatch.setenv("VK_ICD_FILENAMES", str(icd))
    assert gpu_probe.verdict("Vulkan", library, cache=store) == ""
    assert probes == [library, library]
