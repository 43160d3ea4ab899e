"""Logging configured at start-up: a rotating file under the app's log folder (issue 11)."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

import pytest

from sqale_desktop.core import logs, paths

pytestmark = pytest.mark.usefixtures("reset_logging")


def _ours() -> list[logging.Handler]:
    return [h for h in logging.getLogger().handlers if isinstance(h, logging.handlers.RotatingFileHandler)]


def test_the_log_file_is_in_the_log_folder_with_context(isolated_home: Path) -> None:
    path = logs.configure()
    assert path == paths.log_dir() / "sqale-desktop.log"
    assert str(path).startswith(str(isolated_home))
    logging.getLogger("sqale_desktop.test").info("opened %s", "shop.sqlite")
    logging.getLogger("sqale_desktop.test").debug("not at the default level")
    text = path.read_text(encoding="utf-8")
    assert "INFO" in text and "sqale_desktop.test: opened shop.sqlite" in text
    assert "MainThread" in text  # the thread, so a worker's traceback says where it ran
    assert "not at the default level" not in text


def test_configuring_again_replaces_rather_than_adds(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first = logs.configure()
    logs.configure()
    assert len(_ours()) == 1
    monkeypatch.setenv("SQALE_DESKTOP_HOME", str(tmp_path / "other"))
    second = logs.configure()
    assert second != first and len(_ours()) == 1
    logging.getLogger("sqale_desktop.test").warning("where am I")
    assert "where am I" in second.read_text(encoding="utf-8")
    assert not first.exists() or "where am I" not in first.read_text(encoding="utf-8")


def test_verbose_logs_debug_to_the_file_and_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    path = logs.configure(verbose=True)
    logging.getLogger("sqale_desktop.test").debug("every detail")
    assert "every detail" in path.read_text(encoding="utf-8")
    assert "DEBUG sqale_desktop.test: every detail" in capsys.readouterr().err


def test_warnings_reach_the_terminal_without_verbose(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure()
    logging.getLogger("sqale_desktop.test").info("only in the file")
    logging.getLogger("sqale_desktop.test").warning("the disk is nearly full")
    err = capsys.readouterr().err
    assert "the disk is nearly full" in err and "only in the file" not in err


def test_the_file_rotates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "MAX_BYTES", 2000)
    path = logs.configure()
    for i in range(200):
        logging.getLogger("sqale_desktop.test").info("line %d of a long session", i)
    assert path.stat().st_size <= 2000
    assert path.with_name(path.name + ".1").exists()
    assert not path.with_name(path.name + f".{logs.BACKUPS + 1}").exists()


def test_an_uncaught_exception_is_logged_with_its_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    path = logs.configure()
    try:
        raise ZeroDivisionError("a bug in a slot")
    except ZeroDivisionError:
        logs.log_uncaught(*sys.exc_info())  # type: ignore[arg-type]
    text = path.read_text(encoding="utf-8")
    assert "CRITICAL" in text and "uncaught exception" in text
    assert "Traceback" in text and "ZeroDivisionError: a bug in a slot" in text
    assert "ZeroDivisionError" in capsys.readouterr().err  # still printed, as Python does
