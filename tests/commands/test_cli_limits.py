"""The command line under hostile conditions: closed pipes, bad files, bad arguments: one line
of explanation, never a traceback."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from sqale_desktop.cli import main
from sqale_desktop.core.db.opening import STALE_NOTE
from tests.commands.subprocess_cli import run_cli
from tests.helpers import shared_data


def test_a_closed_pipe_ends_quietly(chinook: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader (| head) is gone before anything is written
    try:
        done = run_cli("tool", "--db", str(chinook), "list_tables", stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
    assert done.returncode in (0, 141)


def test_models_list_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = run_cli(
            "models", "list", stdout=write_end, stderr=subprocess.PIPE,
            env={**os.environ, "SQALE_DESKTOP_HOME": str(tmp_path)},
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 141


def test_an_unreachable_server_is_one_line_without_a_traceback(chinook: Path) -> None:
    done = run_cli(
        "ask",
        "--engine",
        "openai",
        "--base-url",
        "http://127.0.0.1:9",
        "--db",
        str(chinook),
        "--question",
        "How many artists?",
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "sqale-desktop ask: cannot reach the server" in done.stderr


def test_a_known_error_escaping_a_command_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sqale_desktop.commands import model_commands
    from sqale_desktop.core.models.errors import ModelError

    def broken(args: object) -> int:
        raise ModelError("The model registry is damaged.")

    monkeypatch.setattr(model_commands, "run_list", broken)
    assert main(["models", "list"]) == 1
    assert capsys.readouterr().err == "sqale-desktop models: The model registry is damaged.\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_fifo_and_a_device_are_not_regular_files(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.sqlite"
    os.mkfifo(fifo)
    done = run_cli("query", "--db", str(fifo), "SELECT 1")
    assert done.returncode == 1
    assert (
        done.stderr
        == f"sqale-desktop query: {fifo} is a named pipe (FIFO), not a regular file: not a SQLite database\n"
    )
    if Path("/dev/zero").exists():
        done = run_cli("query", "--db", "/dev/zero", "SELECT 1")
        assert "/dev/zero is a device, not a regular file" in done.stderr


def test_a_5000_digit_argument_says_what_is_wrong(chinook: Path, capsys: pytest.CaptureFixture[str]) -> None:
    huge = "9" * 5000
    assert (
        main(["tool", "--db", str(chinook), "sample_rows", f'{{"table_name": "Artist", "limit": {huge}}}'])
        == 2
    )
    err = capsys.readouterr().err
    assert "nested" not in err
    assert "JSON_ARGS cannot be read: Exceeds the limit (4300 digits)" in err


def test_a_5000_digit_number_in_a_model_call_is_not_called_nested() -> None:
    from sqale_desktop.core.agent.parser import find_calls

    calls = find_calls('{"tool": "sample_rows", "args": {"table_name": "A", "limit": ' + "9" * 5000 + "}}")
    assert calls[0].error is not None
    assert "nested" not in calls[0].error and "a number is too long" in calls[0].error


def test_tool_prints_the_stale_note_for_an_immutable_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = shared_data("awkward/wal/wal_database.db")
    folder = tmp_path / "ro"
    folder.mkdir()
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{source}{suffix}", folder / f"wal_database.db{suffix}")
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert main(["tool", "--db", str(folder / "wal_database.db"), "list_tables"]) == 0
    finally:
        folder.chmod(0o755)
    assert capsys.readouterr().err == f"note: {STALE_NOTE}\n"
