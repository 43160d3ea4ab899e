"""The window's Help menu: help with the keyboard shortcuts (F1), About, and the log folder.

The shortcuts table is written out here, for people; ``tests/ui/test_help_menu.py`` checks that
every shortcut the window has is in it, so the table cannot fall behind the window.  About names
the versions a bug report needs: the app's, llama.cpp's (the llama-cpp-python build), Qt's and
the model in use.
"""

from __future__ import annotations

import html
import importlib.util
import platform
import re
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import QUrl, qVersion
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QMainWindow,
    QMenu,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop import __version__
from sqale_desktop.core import paths

Keys = QKeySequence.StandardKey | str
SHORTCUTS: tuple[tuple[Keys, str], ...] = (
    (QKeySequence.StandardKey.Open, "Open databases or data files (several at once)"),
    ("Ctrl+Shift+O", "Open a folder of data files"),
    (QKeySequence.StandardKey.Close, "Close the current tab"),
    ("Ctrl+PgDown", "Next tab"),
    ("Ctrl+PgUp", "Previous tab"),
    ("Enter", "Ask the question (in the question box; Shift+Enter starts a new line)"),
    ("Esc", "Stop the agent and the running query on this tab"),
    ("Ctrl+Enter", "Run the SQL in the editor"),
    ("Ctrl+Shift+C", "Copy the SQL"),
    (QKeySequence.StandardKey.Copy, "Copy the selected cells"),
    (QKeySequence.StandardKey.Find, "Filter the schema tree"),
    ("F1", "This help"),
    ("Ctrl+Q", "Quit"),
)
"""(keys, what they do), in the order the help lists them: a standard key stands for every
binding this platform gives it (Close is Ctrl+W and Ctrl+F4 on Linux)."""


def bindings(keys: Keys) -> list[QKeySequence]:
    """The key sequences ``keys`` stands for on this platform."""
    if isinstance(keys, str):
        return [QKeySequence(keys)]
    return list(QKeySequence.keyBindings(keys))


HELP_TEXT = """\
<p>Open a SQLite database, a data file (CSV, TSV, delimited TXT, JSON, JSONL, their .gz, an Excel
or OpenDocument workbook, Parquet, DuckDB) or a folder of data files (Ctrl+O, File → Open Folder…,
drop it on the window, or File → Open Recent); a data file is imported into the app's cache, never
next to it. Each database has its own tab, conversation and schema tree. Type a question and press
Enter: the agent explores the database with its tools, and its query opens in the editor with its
result.</p>
<p>Without a model, browsing and SQL work; Tools → Model Manager… downloads one. The database is
only ever opened read-only.</p>"""


def add_help_menu(window: QMainWindow, model: Callable[[], str] | None = None) -> QMenu:
    """Add Help (F1), About and Show Log Folder to ``window``'s menu bar.

    ``model`` says which model is in use, for About (read when the dialog opens).
    """
    menu = window.menuBar().addMenu("&Help")
    help_action = QAction("SQaLe Desktop &Help", window)
    help_action.setObjectName("help")
    help_action.setShortcut(QKeySequence("F1"))
    help_action.triggered.connect(lambda: show_help(window))
    menu.addAction(help_action)
    show_logs = QAction("Show &Log Folder", window)
    show_logs.setObjectName("show_log_folder")
    show_logs.setToolTip("Open the folder holding sqale-desktop.log (attach it to a bug report)")
    show_logs.triggered.connect(show_log_folder)
    menu.addAction(show_logs)
    menu.addSeparator()
    about = QAction("&About SQaLe Desktop", window)
    about.setObjectName("about")
    about.triggered.connect(lambda: show_about(window, model() if model is not None else "unknown"))
    menu.addAction(about)
    return menu


def show_log_folder() -> bool:
    """Open :func:`paths.log_dir` in the desktop's file manager; False if none could be started."""
    return bool(QDesktopServices.openUrl(QUrl.fromLocalFile(str(paths.log_dir()))))


def shortcut_rows() -> str:
    """The shortcuts as HTML table rows, each key in the platform's own spelling (⌘ on macOS).

    A standard key's bindings without a modifier (the keyboard's own Copy or Open key) are left
    out: a person looks for the combination to press."""
    native = QKeySequence.SequenceFormat.NativeText
    rows = []
    for keys, what in SHORTCUTS:
        portable = QKeySequence.SequenceFormat.PortableText
        pressed = [k for k in bindings(keys) if isinstance(keys, str) or "+" in k.toString(portable)]
        shown = " or ".join(f"<b>{html.escape(k.toString(native))}</b>" for k in pressed)
        rows.append(f"<tr><td>{shown}</td><td>{html.escape(what)}</td></tr>")
    return "".join(rows)


def _dialog(parent: QWidget, title: str, text: str, name: str) -> QDialog:
    dialog = QDialog(parent)
    dialog.setObjectName(name)
    dialog.setWindowTitle(title)
    label = QLabel(text, dialog)
    label.setWordWrap(True)
    label.setOpenExternalLinks(False)
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, dialog)
    buttons.rejected.connect(dialog.reject)
    layout = QVBoxLayout(dialog)
    layout.addWidget(label)
    layout.addWidget(buttons)
    dialog.setMinimumWidth(420)
    return dialog


def show_help(parent: QWidget) -> QDialog:
    """F1: what the app does in two paragraphs, and every keyboard shortcut (scrollable, so that
    nothing is cut off however small the screen)."""
    dialog = QDialog(parent)
    dialog.setObjectName("helpDialog")
    dialog.setWindowTitle("SQaLe Desktop Help")
    browser = QTextBrowser(dialog)
    browser.setObjectName("helpText")
    table = f"<table cellspacing='4'>{shortcut_rows()}</table>"
    browser.setHtml(f"{HELP_TEXT}<h3>Keyboard shortcuts</h3>{table}")
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, dialog)
    buttons.rejected.connect(dialog.reject)
    layout = QVBoxLayout(dialog)
    layout.addWidget(browser, 1)
    layout.addWidget(buttons)
    dialog.resize(560, 560)
    dialog.open()  # not exec(): the window stays usable while the help is open
    return dialog


def versions(model: str) -> list[tuple[str, str]]:
    """What About lists: (what, version)."""
    return [
        ("SQaLe Desktop", __version__),
        ("llama.cpp (llama-cpp-python)", _llama_cpp_version()),
        ("Qt", f"{qVersion()} (PySide6 {pyside_version})"),
        ("Python", platform.python_version()),
        ("Model", model),
    ]


def _llama_cpp_version() -> str:
    """llama-cpp-python's version without importing it (the import loads llama.cpp's library,
    seconds on a cold disk): its distribution's metadata, or, in a frozen build that left the
    metadata out, the ``__version__`` line of its ``__init__.py``."""
    try:
        return metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        pass
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return "not installed"
    try:
        source = Path(spec.origin).read_text(encoding="utf-8")
    except OSError:
        return "installed (version unknown)"
    found = re.search(r"^__version__\s*=\s*[\"']([^\"']+)", source, re.MULTILINE)
    return found.group(1) if found else "installed (version unknown)"


def show_about(parent: QWidget, model: str) -> QDialog:
    """Help → About: the versions, and where the log is."""
    rows = "".join(
        f"<tr><td>{html.escape(what)}</td><td><b>{html.escape(version)}</b></td></tr>"
        for what, version in versions(model)
    )
    text = (
        "<h3>SQaLe Desktop</h3><p>Ask questions about local SQLite databases and data files "
        f"with a local text-to-SQL agent.</p><table cellspacing='4'>{rows}</table>"
        f"<p>Log: {html.escape(str(paths.log_dir()))}</p>"
    )
    dialog = _dialog(parent, "About SQaLe Desktop", text, "aboutDialog")
    dialog.open()
    return dialog
