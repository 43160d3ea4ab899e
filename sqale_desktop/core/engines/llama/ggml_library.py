"""The ``libggml`` that ``libllama`` loads: its path and the library with the backend calls typed.

Its own module because both the app (``backends``, which registers the backends) and the GPU probe's
child (``gpu_probe``, which loads one backend before the app does) open it, and the probe is
imported by ``backends``: here neither imports the other.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path


def ggml_path(folder: Path) -> Path:
    """The ``libggml`` file that ``libllama`` itself uses, whose backend registry llama.cpp reads.

    The wheel ships ``libggml.so`` and ``libggml.so.0`` as two copies, not links; ``libllama``
    needs the SONAME (``libggml.so.0``), and the dynamic loader treats another copy as another
    library with a registry of its own: backends registered there would be invisible to llama.cpp.
    """
    if sys.platform == "win32":
        return folder / "ggml.dll"
    if sys.platform == "darwin":
        versioned = sorted(folder.glob("libggml.[0-9]*.dylib"), key=lambda p: len(p.name))
        return versioned[0] if versioned else folder / "libggml.dylib"
    versioned = sorted(folder.glob("libggml.so.[0-9]*"), key=lambda p: len(p.name))
    return versioned[0] if versioned else folder / "libggml.so"


def ggml_library(folder: Path) -> ctypes.CDLL:
    """``libggml`` as ``libllama`` loads it (importing ``llama_cpp`` first, so it is the same one)."""
    import llama_cpp  # noqa: F401  (loads libggml and libllama from the same folder)

    library = ctypes.CDLL(str(ggml_path(folder)))
    library.ggml_backend_load.restype = ctypes.c_void_p
    library.ggml_backend_load.argtypes = [ctypes.c_char_p]
    library.ggml_backend_reg_count.restype = ctypes.c_size_t
    library.ggml_backend_reg_count.argtypes = []
    return library
