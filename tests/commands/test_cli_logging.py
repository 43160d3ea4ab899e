"""The CLI logs to the app's log file; ``--verbose`` shows everything; a bug's traceback is kept."""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

import pytest

from sqale_desktop import __version__, cli
from sqale_desktop.commands import db_commands
from sqale_desktop.core import logs
from sqale_desktop.core.db.errors import DatabaseUnreadable

pytestmark = pytest.mark.usefixtures("reset_logging")


@pytest.fixture
def tiny_db(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (a INTEGER)")
    conn.close()
    return path


def test_verbose_shows_debug_on_the_terminal(tiny_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--verbose", "query", "--db", str(tiny_db), "SELECT 1"]) == 0
    err = capsys.readouterr().err
    assert "DEBUG sqale_desktop.cli: sqale-desktop" in err and " query " in err
    assert f"sqale-desktop {__version__} query" in logs.log_file().read_text(encoding="utf-8")


def test_without_verbose_the_terminal_stays_quiet(tiny_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["query", "--db", str(tiny_db), "SELECT 1"]) == 0
    assert capsys.readouterr().err == ""


def test_a_known_condition_is_one_line_without_traceback(
    tiny_db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def locked(args: argparse.Namespace) -> int:
        raise DatabaseUnreadable("tiny.db is locked by another program")

    monkeypatch.setattr(db_commands, "run_query", locked)
    assert cli.main(["query", "--db", str(tiny_db), "SELECT 1"]) == 1
    err = capsys.readouterr().err
    assert err == "sqale-desktop query: tiny.db is locked by another program\n"
    text = logs.log_file().read_text(encoding="utf-8")
    assert "sqale-desktop query: tiny.db is locked" in text and "Traceback" not in text


def test_a_bug_keeps_its_traceback_in_the_log(
    tiny_db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(args: argparse.Namespace) -> int:
        raise KeyError("a bug in the query command")

    monkeypatch.setattr(db_commands, "run_query", broken)
    with pytest.raises(KeyError):
        cli.main(["query", "--db", str(tiny_db), "SELECT 1"])
    text = logs.log_file().read_text(encoding="utf-8")
    assert "bug in `sqale-desktop query`" in text
    assert "Traceback" in text and "KeyError: 'a bug in the query command'" in text
    err = capsys.readouterr().err
    assert "bug in `sqale-desktop query`" in err
    assert "Traceback" not in err  # printed once, by Python itself (not captured here), not by the log too
