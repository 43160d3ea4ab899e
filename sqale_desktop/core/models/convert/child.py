"""Moved to :mod:`sqale_desktop.core.child.launch` (the child-process kit, a leaf of core).

Kept as a re-export for the one caller that has not moved yet: the database worker's launcher
(``core.db.process``), whose owner switches its import to ``core.child``; then this file goes.
"""

from __future__ import annotations

from sqale_desktop.core.child.launch import (
    CHILD_FLAG,
    CHILD_MODULES,
    child_command,
    child_env,
    is_frozen,
    run_child,
)

__all__ = ["CHILD_FLAG", "CHILD_MODULES", "child_command", "child_env", "is_frozen", "run_child"]
