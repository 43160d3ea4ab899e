"""Light and dark palettes that follow the system (or the user's choice in the settings).

Qt's Fusion style draws both palettes the same way on every platform, so the app looks alike on
Linux, macOS and Windows and the screenshots in the tests mean something.

Switching while the app runs must leave nothing of the old theme behind (issue 20): widgets under
a style sheet are repolished here (``restyle``); what baked a colour into its text (a rich-text
link, the thinking's grey) re-colours itself on ``QEvent.PaletteChange`` (``ui.chat_widgets``).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

Theme = str  # "system" | "light" | "dark" (core.settings.Theme)


def system_prefers_dark() -> bool:
    hints = QGuiApplication.styleHints()
    return hints.colorScheme() == Qt.ColorScheme.Dark


def dark_palette() -> QPalette:
    p = QPalette()
    window, base, text = QColor(37, 37, 40), QColor(28, 28, 30), QColor(225, 225, 228)
    p.setColor(QPalette.ColorRole.Window, window)
    p.setColor(QPalette.ColorRole.WindowText, text)
    p.setColor(QPalette.ColorRole.Base, base)
    p.setColor(QPalette.ColorRole.AlternateBase, QColor(44, 44, 48))
    p.setColor(QPalette.ColorRole.ToolTipBase, QColor(50, 50, 54))
    p.setColor(QPalette.ColorRole.ToolTipText, text)
    p.setColor(QPalette.ColorRole.PlaceholderText, QColor(140, 140, 145))
    p.setColor(QPalette.ColorRole.Text, text)
    p.setColor(QPalette.ColorRole.Button, QColor(50, 50, 54))
    p.setColor(QPalette.ColorRole.ButtonText, text)
    p.setColor(QPalette.ColorRole.BrightText, QColor(255, 90, 90))
    p.setColor(QPalette.ColorRole.Link, QColor(110, 170, 255))
    p.setColor(QPalette.ColorRole.Highlight, QColor(53, 110, 200))
    p.setColor(QPalette.ColorRole.HighlightedText, QColor(255, 255, 255))
    p.setColor(QPalette.ColorRole.Mid, QColor(70, 70, 75))
    p.setColor(QPalette.ColorRole.Midlight, QColor(60, 60, 64))
    p.setColor(QPalette.ColorRole.Dark, QColor(20, 20, 22))
    disabled = QColor(120, 120, 125)
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText, QPalette.ColorRole.WindowText):
        p.setColor(QPalette.ColorGroup.Disabled, role, disabled)
    return p


def apply_theme(app: QApplication, theme: Theme = "system") -> bool:
    """Apply the palette for ``theme``; returns True when the dark palette is in use."""
    app.setStyle("Fusion")
    dark = theme == "dark" or (theme == "system" and system_prefers_dark())
    app.setPalette(dark_palette() if dark else app.style().standardPalette())
    restyle(app)
    return dark


def restyle(app: QApplication) -> None:
    """Repolish every widget that has a style sheet with the palette now in use.

    Qt's style-sheet style computes the palette of such a widget (and of its children: the banner's
    buttons) once, when it polishes it, and an application palette change does not redo that: the
    "Thinking" toggles stayed light grey on light grey after Dark → Light.  Setting the same sheet
    again makes Qt repolish them.
    """
    for widget in app.allWidgets():
        sheet = widget.styleSheet()
        if sheet:
            widget.setStyleSheet(sheet)


def is_dark(app: QGuiApplication | None = None) -> bool:
    current = app or QGuiApplication.instance()
    if not isinstance(current, QGuiApplication):
        return False
    return current.palette().base().color().lightness() < 128
