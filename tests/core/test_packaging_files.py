"""The packaging files say what the issue asks of them (the built package is checked by
packaging/smoke-test.sh in CI; these catch a broken edit without a build)."""

from __future__ import annotations

import ast
import configparser
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SQLITE_TYPES = {"application/vnd.sqlite3", "application/x-sqlite3"}  # shared-mime-info's names
# The data files the app imports as databases (issue 24): CSV, TSV, JSON, JSON Lines, workbooks,
# Parquet (the last two types are declared by packaging/linux/sqale-desktop-mime.xml).
DATA_TYPES = {
    "text/csv",
    "text/tab-separated-values",
    "application/json",
    "application/x-ndjson",
    "application/jsonl",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.ms-excel.sheet.macroEnabled.12",
    "application/vnd.oasis.opendocument.spreadsheet",
    "application/vnd.apache.parquet",
    "application/x-duckdb",
}


def test_the_desktop_entry_opens_several_files_of_the_sqlite_types() -> None:
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str  # keep the keys as written (Exec, not exec)
    entry.read(REPO / "resources" / "sqale-desktop.desktop", encoding="utf-8")
    section = entry["Desktop Entry"]
    assert section["Exec"] == "sqale-desktop %F"  # %F: several files; %f would drop all but one
    assert section["TryExec"] == "sqale-desktop"
    assert set(filter(None, section["MimeType"].split(";"))) == SQLITE_TYPES | DATA_TYPES
    assert section["Icon"] == "sqale-desktop"


def test_the_mime_package_adds_globs_to_the_sqlite_type() -> None:
    ns = {"m": "http://www.freedesktop.org/standards/shared-mime-info"}
    root = ET.parse(REPO / "packaging" / "linux" / "sqale-desktop-mime.xml").getroot()
    types = {m.get("type"): m for m in root.findall("m:mime-type", ns)}
    assert set(types) == {"application/vnd.sqlite3", "application/vnd.apache.parquet", "application/x-duckdb"}
    mime = types["application/vnd.sqlite3"]
    assert {g.get("pattern") for g in mime.findall("m:glob", ns)} == {"*.sqlite", "*.db3"}
    # the data files the app imports (issue 24): by name and by their magic numbers
    parquet = types["application/vnd.apache.parquet"]
    assert [g.get("pattern") for g in parquet.findall("m:glob", ns)] == ["*.parquet"]
    assert [g.get("pattern") for g in types["application/x-duckdb"].findall("m:glob", ns)] == ["*.duckdb"]


def test_the_spec_leaves_out_the_test_only_packages() -> None:
    tree = ast.parse((REPO / "packaging" / "sqale-desktop.spec").read_text(encoding="utf-8"))
    excludes: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "excludes" for t in node.targets):
            assert isinstance(node.value, ast.List)
            excludes = {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    assert {"torch", "transformers", "tokenizers", "pytest", "hypothesis"} <= excludes


def test_the_shell_scripts_parse() -> None:
    for script, shell in (("linux/install.sh", "sh"), ("build-linux.sh", "bash"), ("smoke-test.sh", "bash")):
        path = REPO / "packaging" / script
        done = subprocess.run(
            [shell, "-n", str(path)], capture_output=True, text=True, check=False, timeout=120
        )
        assert done.returncode == 0, (script, done.stderr)


def test_install_sh_installs_into_a_home_and_uninstalls(tmp_path: Path) -> None:
    """install.sh on a stand-in folder (a script in place of the frozen program)."""
    app = tmp_path / "unpacked" / "sqale-desktop"
    resources = app / "_internal" / "resources"
    resources.mkdir(parents=True)
    for name in ("sqale-desktop.desktop", "sqale-desktop.svg"):
        (resources / name).write_bytes((REPO / "resources" / name).read_bytes())
    mime_xml = REPO / "packaging" / "linux" / "sqale-desktop-mime.xml"
    (resources / "sqale-desktop-mime.xml").write_bytes(mime_xml.read_bytes())
    program = app / "sqale-desktop"
    program.write_text('#!/bin/sh\necho "opened $*"\n', encoding="utf-8")
    program.chmod(0o755)
    (app / "install.sh").write_bytes((REPO / "packaging" / "linux" / "install.sh").read_bytes())
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}

    def install(*args: str) -> str:
        command = ["sh", str(app / "install.sh"), *args]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "installed" in install()
    local = home / ".local"
    launcher = local / "bin" / "sqale-desktop"
    opened = subprocess.run(
        [str(launcher), "a.sqlite", "b.db"], capture_output=True, text=True, check=True, timeout=120
    )
    assert opened.stdout == "opened a.sqlite b.db\n"
    desktop = (local / "share" / "applications" / "sqale-desktop.desktop").read_text(encoding="utf-8")
    assert f"Exec={launcher} %F\n" in desktop and f"TryExec={launcher}\n" in desktop
    assert (local / "share" / "icons" / "hicolor" / "scalable" / "apps" / "sqale-desktop.svg").is_file()
    assert (local / "share" / "mime" / "packages" / "sqale-desktop.xml").is_file()
    assert not (local / "lib" / "sqale-desktop" / "install.sh").exists()
    assert "installed" in install()  # a second install replaces the first
    assert "removed" in install("--uninstall")
    assert [p for p in local.rglob("*sqale-desktop*") if p.exists()] == []


def _unpacked(tmp_path: Path) -> Path:
    """A stand-in release folder (a script in place of the frozen program) holding install.sh."""
    app = tmp_path / "unpacked" / "sqale-desktop"
    resources = app / "_internal" / "resources"
    resources.mkdir(parents=True)
    for name in ("sqale-desktop.desktop", "sqale-desktop.svg"):
        (resources / name).write_bytes((REPO / "resources" / name).read_bytes())
    mime_xml = REPO / "packaging" / "linux" / "sqale-desktop-mime.xml"
    (resources / "sqale-desktop-mime.xml").write_bytes(mime_xml.read_bytes())
    program = app / "sqale-desktop"
    program.write_text('#!/bin/sh\necho "opened $*"\n', encoding="utf-8")
    program.chmod(0o755)
    (app / "install.sh").write_bytes((REPO / "packaging" / "linux" / "install.sh").read_bytes())
    return app


def _run_install(app: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        ["sh", str(app / "install.sh"), *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done


def _exec_argv(desktop: Path) -> list[str]:
    """The Exec key as a desktop environment reads it (Desktop Entry spec 1.5, "The Exec key"):
    the string escapes first (a doubled backslash is one, ``\\s`` a space), then the arguments:
    split at spaces outside double quotes; inside them a backslash escapes ``"``, `` ` ``, ``$``
    and ``\\``; ``%%`` is a literal %."""
    lines = desktop.read_text(encoding="utf-8").splitlines()
    (raw,) = [line[5:] for line in lines if line.startswith("Exec=")]
    value = re.sub(r"\\(.)", lambda m: {"s": " ", "n": "\n", "t": "\t", "r": "\r"}.get(m[1], m[1]), raw)
    args: list[str] = []
    current: list[str] | None = None
    quoted = False
    i = 0
    while i < len(value):
        char = value[i]
        if quoted and char == "\\" and value[i + 1 : i + 2] in ('"', "`", "$", "\\"):
            current = (current or []) + [value[i + 1]]
            i += 2
            continue
        if char == '"':
            quoted = not quoted
            current = current or []
        elif char == " " and not quoted:
            if current is not None:
                args.append("".join(current))
            current = None
        else:
            current = (current or []) + [char]
        i += 1
    if current is not None:
        args.append("".join(current))
    return [arg.replace("%%", "%") for arg in args]


def test_install_sh_quotes_exec_for_a_home_with_spaces_and_specials(tmp_path: Path) -> None:
    app = _unpacked(tmp_path)
    home = tmp_path / 'my home $HOME `x` "q" 100%'
    home.mkdir()
    _run_install(app, home)
    launcher = home / ".local" / "bin" / "sqale-desktop"
    desktop = home / ".local" / "share" / "applications" / "sqale-desktop.desktop"
    argv = _exec_argv(desktop)
    assert argv == [str(launcher), "%F"]
    opened = subprocess.run([argv[0], "a b.sqlite"], capture_output=True, text=True, check=True, timeout=120)
    assert opened.stdout == "opened a b.sqlite\n"
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str  # type: ignore[assignment,method-assign]
    entry.read(desktop, encoding="utf-8")
    assert entry["Desktop Entry"]["TryExec"] == str(launcher)  # no backslash in it: written as is


def test_install_sh_leaves_a_launcher_it_did_not_create(tmp_path: Path) -> None:
    """A ~/.local/bin/sqale-desktop from `pip install --user` survives install and --uninstall."""
    app = _unpacked(tmp_path)
    home = tmp_path / "home"
    bin_dir = home / ".local" / "bin"
    bin_dir.mkdir(parents=True)
    theirs = bin_dir / "sqale-desktop"
    theirs.write_text("#!/bin/sh\necho pip's own\n", encoding="utf-8")
    done = _run_install(app, home)
    assert "not from this installer" in done.stderr
    assert theirs.read_text(encoding="utf-8") == "#!/bin/sh\necho pip's own\n" and not theirs.is_symlink()
    desktop = home / ".local" / "share" / "applications" / "sqale-desktop.desktop"
    assert _exec_argv(desktop) == [str(home / ".local" / "lib" / "sqale-desktop" / "sqale-desktop"), "%F"]
    _run_install(app, home, "--uninstall")
    assert theirs.read_text(encoding="utf-8") == "#!/bin/sh\necho pip's own\n"
    assert not desktop.exists()
    other = bin_dir / "elsewhere"
    other.write_text("#!/bin/sh\n", encoding="utf-8")
    theirs.unlink()
    theirs.symlink_to(other)  # a link, but not to the program folder: not ours either
    _run_install(app, home)
    _run_install(app, home, "--uninstall")
    assert theirs.is_symlink() and theirs.resolve() == other
