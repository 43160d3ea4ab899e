"""Before Qt starts on X11, the app names the libraries the xcb plugin lacks (issue 20, item 4)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sqale_desktop.ui import xcb_check


def _plugin_needing(tmp_path: Path, soname: str) -> Path:
    """A real shared object that needs ``soname``, which is then removed: what ldd meets when a
    package is not installed."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc is not None, "a C compiler is needed (it builds llama-cpp-python too)"
    (tmp_path / "needed.c").write_text("int needed(void) { return 1; }\n", encoding="utf-8")
    (tmp_path / "plugin.c").write_text("int needed(void);\nint plugin(void) { return needed(); }\n")
    stub = tmp_path / soname
    subprocess.run(
        [cc, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(stub), str(tmp_path / "needed.c")],
        check=True,
        timeout=120,
    )
    plugin = tmp_path / "libqxcb.so"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(plugin), str(tmp_path / "plugin.c"), str(stub)],
        check=True,
        timeout=120,
    )
    stub.unlink()
    return plugin


def test_a_missing_library_is_named_with_its_packages(tmp_path: Path) -> None:
    plugin = _plugin_needing(tmp_path, "libxcb-icccm.so.4.sqale-test")
    missing = xcb_check.missing_libraries(plugin, runtime_loaded=("libsqale-not-installed.so.0",))
    assert missing == ["libxcb-icccm.so.4.sqale-test", "libsqale-not-installed.so.0"]


def test_the_debian_12_case_names_the_right_packages() -> None:
    text = xcb_check.advice(["libxcb-icccm.so.4", "libxcb-keysyms.so.1"])
    assert text.splitlines() == [
        "Qt's X11 (xcb) platform plugin cannot load: the system lacks "
        "libxcb-icccm.so.4, libxcb-keysyms.so.1.",
        "  Debian/Ubuntu: sudo apt install libxcb-icccm4 libxcb-keysyms1",
        "  Fedora: sudo dnf install xcb-util-wm xcb-util-keysyms",
        "  Arch: sudo pacman -S xcb-util-wm xcb-util-keysyms",
    ]
    assert "provides libfoo.so.1" in xcb_check.advice(["libfoo.so.1"])


def test_ldd_output_is_read_line_by_line() -> None:
    output = (
        "\tlinux-vdso.so.1 (0x00007ffd)\n"
        "\tlibQt6XcbQpa.so.6 => /opt/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f)\n"
        "\tlibxcb-icccm.so.4 => not found\n"
        "\tlibxcb-keysyms.so.1 => not found\n"
        "\tlibxcb-icccm.so.4 => not found\n"
    )
    assert xcb_check.not_found(output) == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"]


@pytest.mark.parametrize(
    ("environ", "platform", "expected"),
    [
        ({}, "linux", True),
        ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", False),
        ({"QT_QPA_PLATFORM": "xcb", "WAYLAND_DISPLAY": "wayland-0"}, "linux", True),
        ({"QT_QPA_PLATFORM": "offscreen"}, "linux", False),
        ({"QT_QPA_PLATFORM": "xcb;wayland"}, "linux", True),
        ({}, "darwin", False),
    ],
)
def test_the_check_runs_only_where_qt_tries_xcb(
    environ: dict[str, str], platform: str, expected: bool
) -> None:
    assert xcb_check.uses_xcb(environ, platform) is expected


def test_this_machines_plugin_is_found_and_checked() -> None:
    """The real plugin of the installed Qt: found where QLibraryInfo says, and ldd answers for it."""
    plugin = xcb_check.xcb_plugin()
    assert plugin is not None and plugin.name == "libqxcb.so"
    assert isinstance(xcb_check.missing_libraries(plugin), list)
