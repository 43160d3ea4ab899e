"""The window's Help menu: where the log file is (bugs are reported with it)."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QAction, QDesktopServices
from PySide6.QtWidgets import QMainWindow, QMenu

from sqale_desktop.core import paths


def add_help_menu(window: QMainWindow) -> QMenu:
    """Add Help → Show Log Folder to ``window``'s menu bar, opening the folder in the file manager."""
    menu = window.menuBar().addMenu("&Help")
    show_logs = QAction("Show &Log Folder", window)
    show_logs.setObjectName("show_log_folder")
    show_logs.setToolTip("Open the folder holding sqale-desktop.log (attach it to a bug report)")
    show_logs.triggered.connect(show_log_folder)
    menu.addAction(show_logs)
    return menu


def show_log_folder() -> bool:
    """Open :func:`paths.log_dir` in the desktop's file manager; False if none could be started."""
    return bool(QDesktopServices.openUrl(QUrl.fromLocalFile(str(paths.log_dir()))))
