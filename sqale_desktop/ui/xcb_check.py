"""Before Qt starts on X11: name the system libraries its xcb platform plugin cannot find.

When no platform plugin loads, Qt aborts with a message that can mislead: on Debian 12 it said
"xcb-cursor0 or libxcb-cursor0 is needed" while that was installed and libxcb-icccm4 and
libxcb-keysyms1 were missing (and it says the same when only the display is missing).  So before
the QApplication exists, the app loads the plugin itself; when that fails it asks the dynamic
loader what the plugin needs, with the lookup the ``.deb``'s dependency step uses
(``packaging/build-linux.sh``: ``ldd`` on every library).  libxcb-cursor, which Qt loads only at
run time (``dlopen``, invisible to ``ldd``), is tried too.  It says what is missing and which
package provides it on Debian/Ubuntu, Fedora and Arch; it only speaks, Qt still decides.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

DISTRIBUTIONS = ("Debian/Ubuntu", "Fedora", "Arch")
INSTALL = {"Debian/Ubuntu": "sudo apt install", "Fedora": "sudo dnf install", "Arch": "sudo pacman -S"}
PACKAGES: dict[str, tuple[str, str, str]] = {
    # library: (Debian/Ubuntu, Fedora, Arch) package; the README's table lists the same names.
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms", "xcb-util-keysyms"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image", "xcb-util-image"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil", "xcb-util-renderutil"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util", "xcb-util"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11", "libxkbcommon-x11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon", "libxkbcommon"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb", "libx11"),
    "libxcb.so.1": ("libxcb1", "libxcb", "libxcb"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb", "libxcb"),
    "libxcb-xinput.so.0": ("libxcb-xinput0", "libxcb", "libxcb"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb", "libxcb"),
    "libxcb-glx.so.0": ("libxcb-glx0", "libxcb", "libxcb"),
}
RUNTIME_LOADED = ("libxcb-cursor.so.0",)
"""Libraries Qt's xcb plugin opens with dlopen (so ``ldd`` does not list them)."""


def uses_xcb(environ: Mapping[str, str] = os.environ, platform: str = sys.platform) -> bool:
    """Whether Qt will try the xcb plugin first: on Linux, asked for it, or on X11 without Wayland."""
    if not platform.startswith("linux"):
        return False
    chosen = environ.get("QT_QPA_PLATFORM", "")
    if chosen:
        return chosen.split(";")[0].split(":")[0] == "xcb"
    return not environ.get("WAYLAND_DISPLAY")


def xcb_plugin() -> Path | None:
    """Qt's xcb platform plugin file, where this Qt keeps its plugins."""
    from PySide6.QtCore import QLibraryInfo

    plugin = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)) / "platforms" / "libqxcb.so"
    return plugin if plugin.is_file() else None


def not_found(ldd_output: str) -> list[str]:
    """The libraries ``ldd`` reports as ``NAME => not found``, in its order."""
    missing = []
    for line in ldd_output.splitlines():
        name, _, target = line.strip().partition(" => ")
        if target.strip() == "not found" and name not in missing:
            missing.append(name)
    return missing


def missing_libraries(plugin: Path, runtime_loaded: tuple[str, ...] = RUNTIME_LOADED) -> list[str]:
    """What ``plugin`` needs (directly or through the libraries it needs) that the loader cannot
    find, then the run-time loaded libraries that cannot be opened."""
    missing: list[str] = []
    try:
        # The loader's own answer, in milliseconds: when the plugin loads, everything it links to is
        # there (Qt loads these libraries next anyway).  Only a failure pays for ldd's full list.
        ctypes.CDLL(str(plugin), mode=os.RTLD_LAZY | os.RTLD_LOCAL)
        loads = True
    except OSError:
        loads = False
    ldd = shutil.which("ldd")
    if not loads and ldd is not None:
        try:
            done = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=20, check=False)
            missing = not_found(done.stdout)
        except (OSError, subprocess.SubprocessError) as exc:  # no answer: Qt's own message follows
            log.debug("ldd %s failed: %s", plugin, exc)
    for name in runtime_loaded:
        try:
            ctypes.CDLL(name)  # what Qt's dlopen does; the library stays loaded, as Qt would keep it
        except OSError:
            if name not in missing:
                missing.append(name)
    return missing


def advice(missing: list[str]) -> str:
    """What to tell a person: the missing libraries and the packages to install, per distribution."""
    lines = ["Qt's X11 (xcb) platform plugin cannot load: the system lacks " + ", ".join(missing) + "."]
    for column, distribution in enumerate(DISTRIBUTIONS):
        packages = list(dict.fromkeys(PACKAGES[name][column] for name in missing if name in PACKAGES))
        if packages:
            lines.append(f"  {distribution}: {INSTALL[distribution]} {' '.join(packages)}")
    unknown = [name for name in missing if name not in PACKAGES]
    if unknown:
        lines.append("  (install the package that provides " + ", ".join(unknown) + ")")
    return "\n".join(lines)


def warn_if_xcb_cannot_load() -> list[str]:
    """On X11, say (as a warning: the terminal and the log) which libraries the xcb plugin lacks,
    before Qt aborts with its own message; the missing libraries."""
    if not uses_xcb():
        return []
    plugin = xcb_plugin()
    if plugin is None:
        return []
    missing = missing_libraries(plugin)
    if missing:
        log.warning("%s", advice(missing))
    return missing
