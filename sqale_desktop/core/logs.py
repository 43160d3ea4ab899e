"""Logging set up once at start-up: a rotating file people can find, and the terminal for warnings.

The file is ``sqale-desktop.log`` in :func:`paths.log_dir` (Help → Show Log Folder opens it), kept
to a few hundred KiB by rotation (the standard library's ``RotatingFileHandler``; no extra
dependency is worth it).  Each line names the time, level, process, thread and logger, so a bug's
traceback says where it happened; known conditions are logged as one line (``core.errors``).

Secrets never reach it: tokens and API keys are not logged anywhere in the code (they stay in the
keyring and in request headers, which no logger here prints), and tests/core/models/
test_token_leak.py greps this very file after a run that used a key.

:func:`configure` is idempotent and follows ``SQALE_DESKTOP_HOME``: calling it again (every CLI call
in a test process does) replaces the handlers it installed rather than adding more.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import threading
import types
from pathlib import Path
from typing import TextIO

from sqale_desktop.core import paths

LOG_FILE = "sqale-desktop.log"
MAX_BYTES = 512 * 1024
BACKUPS = 3
CONSOLE_VERBOSE_FORMAT = "%(levelname)s %(name)s: %(message)s"
FILE_FORMAT = "%(asctime)s %(levelname)s [%(process)d %(threadName)s] %(name)s: %(message)s"

_lock = threading.Lock()
_installed: list[logging.Handler] = []
_log = logging.getLogger(__name__)


class _CurrentStderr(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is now (a test's capture, a redirected terminal).

    A plain StreamHandler keeps the stream it was given, which may be closed by the next write.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


class _NoTraceback(logging.Formatter):
    """The terminal's lines: a traceback goes to the file only (Python prints an uncaught one itself)."""

    def format(self, record: logging.LogRecord) -> str:
        plain = logging.makeLogRecord(record.__dict__)
        plain.exc_info = plain.exc_text = plain.stack_info = None
        return super().format(plain)


def log_file() -> Path:
    """Where the log is written (the folder is created)."""
    return paths.log_dir() / LOG_FILE


def configure(verbose: bool = False) -> Path:
    """Send records to the log file (INFO, or DEBUG when ``verbose``) and warnings to stderr.

    With ``verbose`` the terminal gets DEBUG too, as ``sqale-desktop --verbose`` promises.  Returns
    the log file's path.
    """
    target = log_file()
    level = logging.DEBUG if verbose else logging.INFO
    file_handler = logging.handlers.RotatingFileHandler(
        target, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8", delay=True
    )
    file_handler.setLevel(level)
    file_handler.setFormatter(logging.Formatter(FILE_FORMAT))
    console = _CurrentStderr()
    console.setLevel(logging.DEBUG if verbose else logging.WARNING)
    console.setFormatter(_NoTraceback(CONSOLE_VERBOSE_FORMAT if verbose else "%(message)s"))
    root = logging.getLogger()
    with _lock:
        _remove_installed(root)
        for handler in (file_handler, console):
            root.addHandler(handler)
            _installed.append(handler)
        if root.level == logging.NOTSET or root.level > level:
            root.setLevel(level)
    return target


def reset() -> None:
    """Remove (and close) the handlers :func:`configure` installed."""
    with _lock:
        _remove_installed(logging.getLogger())


def _remove_installed(root: logging.Logger) -> None:
    for handler in _installed:
        root.removeHandler(handler)
        handler.close()
    _installed.clear()


def log_uncaught(kind: type[BaseException], value: BaseException, tb: types.TracebackType | None) -> None:
    """A ``sys.excepthook``: an exception nobody caught is a bug, so its traceback goes to the log."""
    if not issubclass(kind, KeyboardInterrupt):
        _log.critical("uncaught exception (a bug)", exc_info=(kind, value, tb))
    sys.__excepthook__(kind, value, tb)
