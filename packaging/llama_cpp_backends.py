"""Make llama-cpp-python's build ship llama.cpp's dynamic backends: the CPU variants the app offers.

With ``GGML_BACKEND_DL=ON`` every ggml backend is its own shared library, loaded at run time
(``sqale_desktop/core/engines/llama/backends.py``), and ``GGML_CPU_ALL_VARIANTS=ON`` builds the
CPU backend once per x86 micro-architecture level.  Two things in the 0.3.36 sdist stand in the
way, and this script changes both, refusing loudly a source it does not recognise:

1. llama-cpp-python installs a fixed list of targets into ``llama_cpp/lib`` (``ggml-cpu``,
   ``ggml-vulkan``, ...); the variants are called ``ggml-cpu-<level>`` and would be left out of the
   wheel.  They are added to its install list.
2. ggml's variant list is trimmed to :data:`SHIPPED` (x86-64).  Left out:

   - ``sapphirerapids``: the only variant built with AMX, and a native build on an Intel machine
     of this workplace crashed in ggml's AMX matmul at the first decode (ggml-org/llama.cpp#20824,
     ``../shared/ENGINE-NOTES.md``).  ggml's scorer would pick it on every AMX CPU, so it is not
     built at all; those CPUs run the ``icelake``/``zen4`` kernels (AVX-512 VNNI/BF16 without AMX).
   - ``ivybridge``, ``piledriver``, ``cannonlake``, ``cascadelake``, ``cooperlake``: each only
     adds one instruction set over a shipped neighbour (F16C, FMA, VBMI, VNNI, BF16), and each
     variant costs about as much build time and 2-3 MB as the whole CPU backend.  A CPU of those
     generations scores the neighbour below it (e.g. Cascade Lake runs ``skylakex``).

Usage: ``python packaging/llama_cpp_backends.py UNPACKED_SDIST_FOLDER`` (the Makefile runs it
before building the wheel, with ``llama_cpp_vulkan_compat.py``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

#: The CPU variants the app ships, lowest level first (ggml's names; its CMake list gives the ISA).
SHIPPED = ("x64", "sse42", "sandybridge", "haswell", "skylakex", "icelake", "zen4", "alderlake")

GGML_LIST = Path("vendor/llama.cpp/ggml/src/CMakeLists.txt")
INSTALL_LIST = Path("CMakeLists.txt")
INSTALL_ANCHOR = "    llama_cpp_python_install_target(ggml-cpu)\n"
INSTALL_ADDED = (
    "    # sqale-desktop: the CPU variants of a GGML_CPU_ALL_VARIANTS build "
    "(packaging/llama_cpp_backends.py)\n"
    f"    foreach(variant {' '.join(SHIPPED)})\n"
    "        llama_cpp_python_install_target(ggml-cpu-${variant})\n"
    "    endforeach()\n"
)
VARIANT_LINE = re.compile(r"^(\s*)ggml_add_cpu_backend_variant\((\w+)\b[^)]*\)\s*$", re.MULTILINE)
X86_BLOCK = re.compile(
    r'if \(GGML_SYSTEM_ARCH STREQUAL "x86"\)\n(.*?)\n\s*elseif\(GGML_SYSTEM_ARCH STREQUAL "ARM"\)',
    re.DOTALL,
)


def trim_variants(text: str) -> str:
    """Comment out every x86 variant not in :data:`SHIPPED`; the ARM/Power lists are untouched."""
    block = X86_BLOCK.search(text)
    if block is None:
        raise SystemExit(f"{GGML_LIST}: the x86 variant list was not found; update this script")
    found = [m.group(2) for m in VARIANT_LINE.finditer(block.group(1))]
    missing = set(SHIPPED) - set(found)
    if missing:
        raise SystemExit(f"{GGML_LIST}: variants {sorted(missing)} are not in ggml's list")

    def keep_or_drop(match: re.Match[str]) -> str:
        if match.group(2) in SHIPPED:
            return match.group(0)
        return f"{match.group(1)}# sqale-desktop leaves out: {match.group(0).strip()}"

    trimmed = VARIANT_LINE.sub(keep_or_drop, block.group(1))
    return text[: block.start(1)] + trimmed + text[block.end(1) :]


def add_install_targets(text: str) -> str:
    """Install the variant libraries into ``llama_cpp/lib`` beside ``libggml.so``."""
    if INSTALL_ADDED in text:
        return text
    if text.count(INSTALL_ANCHOR) != 1:
        raise SystemExit(f"{INSTALL_LIST}: the ggml-cpu install line was not found once")
    return text.replace(INSTALL_ANCHOR, INSTALL_ANCHOR + INSTALL_ADDED)


def patch(root: Path) -> str:
    """Apply both changes under ``root`` (idempotent); returns what was done."""
    ggml = root / GGML_LIST
    ggml.write_text(trim_variants(ggml.read_text(encoding="utf-8")), encoding="utf-8")
    install = root / INSTALL_LIST
    install.write_text(add_install_targets(install.read_text(encoding="utf-8")), encoding="utf-8")
    return f"{root}: CPU variants {', '.join(SHIPPED)} built and installed"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(patch(Path(sys.argv[1])))
