"""`sqale-desktop FILE...` opens the window; subcommands stay subcommands; --help says both.

What the desktop entry's ``%F`` runs must reach the window, never argparse's "invalid choice".
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop import cli
from tests.commands.subprocess_cli import run_cli, run_python


@pytest.fixture
def commands() -> set[str]:
    return cli.command_names(cli.build_parser())


def test_no_arguments_opens_the_window_with_no_files(commands: set[str]) -> None:
    assert cli.launch_files([], commands) == []


def test_database_paths_open_the_window(commands: set[str], tmp_path: Path) -> None:
    files = [str(tmp_path / "a.sqlite"), "relative/b.db", "missing.db3"]
    assert cli.launch_files(files, commands) == files  # a missing file is still the window's to report


def test_subcommands_and_options_go_to_argparse(commands: set[str]) -> None:
    assert {"ask", "query", "tool", "models"} <= commands
    for args in (
        ["query", "--db", "x.sqlite", "SELECT 1"],
        ["models", "list"],
        ["ask"],
        ["--help"],
        ["--version"],
        ["x.sqlite", "--bogus"],
    ):
        assert cli.launch_files(args, commands) is None, args


def test_a_file_named_like_a_command_is_a_file(
    commands: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.launch_files(["ask"], commands) is None
    assert cli.launch_files(["./ask"], commands) == ["./ask"]
    (tmp_path / "ask").write_bytes(b"")
    assert cli.launch_files(["ask"], commands) == ["ask"]
    assert cli.launch_files(["ask", "query"], commands) == ["ask", "query"]
    # With options it is the subcommand again: `sqale-desktop ask --db ...` next to a file `ask`.
    assert cli.launch_files(["ask", "--db", "x.sqlite"], commands) is None


def test_double_dash_makes_everything_after_it_a_file(commands: set[str]) -> None:
    assert cli.launch_files(["--", "-odd.db", "--help"], commands) == ["-odd.db", "--help"]


def test_main_hands_the_files_to_the_app(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """main() routes files to run_app (stubbed here: the window itself is tested in tests/ui)."""
    import sqale_desktop.ui.app as app_mod

    seen: dict[str, Any] = {}

    def fake_run_app(argv: Any = None, files: Any = (), verbose: bool = False) -> int:
        seen["files"] = list(files)
        seen["verbose"] = verbose
        return 7

    monkeypatch.setattr(app_mod, "run_app", fake_run_app)
    db = tmp_path / "models"  # named like a command group, and it exists
    db.write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["models", str(tmp_path / "x.db")]) == 7
    # Made absolute in the folder it ran in (issue 32, item 1): the tabs keep them for next time.
    assert seen == {"files": [tmp_path / "models", tmp_path / "x.db"], "verbose": False}
    # The global option before the files is the window's too (issue 20, item 15).
    for flag in ("--verbose", "-v"):
        assert cli.main([flag, str(tmp_path / "x.db")]) == 7
        assert seen == {"files": [tmp_path / "x.db"], "verbose": True}


def test_verbose_file_opens_the_window_and_logs_everything(chinook: Path) -> None:
    """`sqale-desktop --verbose FILE`: the window opens FILE and the terminal gets DEBUG lines."""
    import json
    import os

    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", SQALE_DESKTOP_QUIT_AFTER_SHOWN="1")
    done = run_cli("--verbose", str(chinook), env=env)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [e["event"] for e in events] == ["shown", "ready"]
    assert events[1]["tabs"] == [str(chinook)]
    assert "DEBUG" in done.stderr and "Traceback" not in done.stderr


def test_help_lists_the_file_usage_next_to_the_commands() -> None:
    done = run_cli("--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: sqale-desktop [FILE ...]\n       sqale-desktop COMMAND")
    assert "query" in done.stdout and "ask" in done.stdout
    assert "Each launch opens its own window" in done.stdout


def test_an_unknown_option_is_still_a_usage_error() -> None:
    done = run_cli("--no-such-option")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


def test_without_pyside6_a_file_argument_says_the_window_cannot_start(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys

        class BlockQt:
            def find_spec(self, name, path=None, target=None):
                if name == "PySide6" or name.startswith("PySide6."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, BlockQt())
        from sqale_desktop.cli import main
        raise SystemExit(main(sys.argv[1:]))
        """
    )
    done = run_python("-c", script, str(tmp_path / "shop.sqlite"))
    assert done.returncode == 1
    assert done.stderr.startswith("sqale-desktop: the desktop app cannot start")
    assert "Traceback" not in done.stderr
