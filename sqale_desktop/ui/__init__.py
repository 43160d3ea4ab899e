"""The Qt layer: the only package that imports PySide6."""

from sqale_desktop.ui._none_guard import guard_none

# Before anything else calls into Qt: see _none_guard for the PySide6 6.12.0 bug this avoids.
NONE_GUARDED = guard_none()
