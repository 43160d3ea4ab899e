"""A GPU backend is loaded first in a child process; only one that loaded there is loaded here.

Loading ``libggml-vulkan.so`` loads the Vulkan loader (``libvulkan.so.1``) and through it every
installed driver (an ICD named by a JSON file in ``/usr/share/vulkan/icd.d`` and its siblings), and
each runs its own code at load and at device enumeration.  A broken one aborts, segfaults or hangs
the process that loads it: with a model selected, the window died a second after it showed, and a
hanging driver hung it.  So :func:`verdict` loads the backend in a child (``core.child``) and lists
its devices there under :data:`PROBE_S`; a crash or a hang there means the CPU, with the reason for
the status line (``Vulkan: its driver crashed (SIGSEGV) when loaded; running on the CPU``).

The verdict is remembered (``<cache>/gpu-probe.json``) for this backend library, loader and set of
drivers: the key is the identity (path, size, modification time) of the backend file, of every
``libvulkan`` the dynamic loader could take, and of every ICD file with the library it names, plus
the environment variables that choose them.  A later start with the same key does not probe again;
a driver update, a new ICD or another loader probes once more.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sqale_desktop.core import child

_log = logging.getLogger(__name__)

MODULE = "sqale_desktop.core.engines.llama.gpu_probe"
PROBE_S = 20.0  # a driver's first load and device list (a cold shader cache can take seconds)
VERSION = 1
# The loader's own variables (Khronos' loader documentation) and the dynamic linker's.
_ENV = ("VK_ICD_FILENAMES", "VK_DRIVER_FILES", "VK_ADD_DRIVER_FILES", "VK_LOADER_DRIVERS_SELECT",
        "VK_LOADER_DRIVERS_DISABLE", "GGML_VK_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "LD_PRELOAD",
        "XDG_DATA_DIRS", "XDG_CONFIG_DIRS", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")  # fmt: skip
_ICD_DIRS = ("vulkan/icd.d", "vulkan/implicit_layer.d", "vulkan/explicit_layer.d")
_LIB_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib", "/lib/x86_64-linux-gnu",
             "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")  # fmt: skip
_LOADER_NAMES = ("libvulkan.so.1", "libvulkan.so", "libcuda.so.1", "libamdhip64.so")


def verdict(display: str, library: Path, *, probe_s: float = PROBE_S, cache: Path | None = None) -> str:
    """``""`` when ``library`` loads and lists its devices in a child; else why not, in words.

    ``cache``: the verdicts' file (default ``<cache>/gpu-probe.json``)."""
    store = cache if cache is not None else _default_cache()
    key = identity(library)
    known = _load(store)
    if key in known:
        return str(known[key].get("reason", ""))
    reason = probe(display, library, probe_s=probe_s)
    known[key] = {"reason": reason, "library": str(library)}
    _save(store, known)
    return reason


def probe(display: str, library: Path, *, probe_s: float = PROBE_S) -> str:
    """Load ``library`` in a child and list its devices; ``""`` or the reason it failed."""
    what = f"{display}: its driver"
    try:
        done = child.run(
            MODULE,
            {"library": str(Path(library).absolute())},
            what=what,
            total_s=probe_s,
            memory_mb=None,  # a driver maps its own memory; the deadline bounds it
        )
    except child.ChildTimedOut:
        return f"{what} did not answer within {probe_s:g} s when loaded; running on the CPU"
    except child.ChildDied as exc:
        return f"{exc} when loaded; running on the CPU"
    except child.ChildFailed as exc:
        return f"{display}: {exc}; running on the CPU"
    _log.info("%s probe: %s", display, done.data.get("devices"))
    return ""


def identity(library: Path) -> str:
    """What the verdict on ``library`` depends on, as one hash (see the module's docstring)."""
    parts: list[str] = [f"v{VERSION}", sys.platform, _stat(Path(library))]
    parts += [f"{name}={os.environ.get(name, '')}" for name in _ENV]
    for path in sorted(set(_loader_files(Path(library).parent)) | set(_icd_files())):
        parts.append(_stat(path))
        if path.suffix == ".json":
            parts += [_stat(p) for p in _icd_libraries(path)]
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _stat(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _loader_files(beside: Path) -> Iterable[Path]:
    """Every loader the dynamic linker could take: beside the backend (its rpath), on
    ``LD_LIBRARY_PATH``, in the system's folders."""
    dirs = [str(beside), *filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)), *_LIB_DIRS]
    for folder in dirs:
        for name in _LOADER_NAMES:
            path = Path(folder) / name
            if path.exists():
                yield path


def _icd_files() -> Iterable[Path]:
    roots = ["/etc", "/usr/local/share", "/usr/share", str(Path.home() / ".local/share")]
    roots += os.environ.get("XDG_DATA_DIRS", "").split(os.pathsep)
    roots += os.environ.get("XDG_CONFIG_DIRS", "").split(os.pathsep)
    for root in filter(None, roots):
        for sub in _ICD_DIRS:
            folder = Path(root) / sub
            if folder.is_dir():
                yield from sorted(folder.glob("*.json"))
    for name in ("VK_ICD_FILENAMES", "VK_DRIVER_FILES", "VK_ADD_DRIVER_FILES"):
        for entry in filter(None, os.environ.get(name, "").split(os.pathsep)):
            yield Path(entry)


def _icd_libraries(manifest: Path) -> list[Path]:
    try:
        if manifest.stat().st_size > 1 << 20:
            return []
        data = json.loads(manifest.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return []
    found = []
    for section in ("ICD", "layer"):
        value = data.get(section) if isinstance(data, dict) else None
        name = value.get("library_path") if isinstance(value, dict) else None
        if isinstance(name, str):
            path = Path(name)
            found.append(path if path.is_absolute() or "/" not in name else manifest.parent / path)
    return found


def _default_cache() -> Path:
    from sqale_desktop.core.paths import cache_dir

    return cache_dir() / "gpu-probe.json"


def _load(store: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(store.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(store: Path, known: dict[str, dict[str, Any]]) -> None:
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        tmp = store.with_name(f".{store.name}.{os.getpid()}")
        tmp.write_text(json.dumps(known, indent=1), encoding="utf-8")
        os.replace(tmp, store)
    except OSError as exc:  # an unwritable cache: the next start probes again, nothing worse
        _log.warning("cannot remember the GPU probe in %s: %s", store, exc)


def _probe_here(plan: dict[str, Any], _endpoint: child.Endpoint) -> dict[str, Any]:
    """In the child: open the library (its driver's load-time code runs), then let ggml register
    it and list its devices, as the app would."""
    library = Path(plan["library"])
    try:
        ctypes.CDLL(str(library))  # a driver that aborts or hangs at load does so here
    except OSError as exc:  # no loader: the app's own open says so in its words, harmlessly
        return {"devices": [], "unopened": str(exc)}
    devices: list[str] = []
    try:
        from sqale_desktop.core.engines.llama.ggml_library import ggml_library

        ggml = ggml_library(library.parent)
    except (ImportError, OSError):
        return {"devices": devices}  # no libggml beside it (a test's stand-in): loading was the test
    ggml.ggml_backend_reg_dev_count.restype = ctypes.c_size_t
    ggml.ggml_backend_reg_dev_count.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_reg_dev_get.restype = ctypes.c_void_p
    ggml.ggml_backend_reg_dev_get.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    ggml.ggml_backend_dev_description.restype = ctypes.c_char_p
    ggml.ggml_backend_dev_description.argtypes = [ctypes.c_void_p]
    reg = ggml.ggml_backend_load(str(library).encode())
    if not reg:
        return {"devices": devices}
    for i in range(int(ggml.ggml_backend_reg_dev_count(reg))):  # the driver enumerates here
        dev = ggml.ggml_backend_reg_dev_get(reg, i)
        description = ggml.ggml_backend_dev_description(dev) if dev else None
        devices.append((description or b"").decode("utf-8", "replace"))
    return {"devices": devices}


def child_main(argv: Sequence[str]) -> int:
    """The child's entry (``--child-module sqale_desktop.core.engines.llama.gpu_probe``)."""
    del argv
    return child.serve(_probe_here)
