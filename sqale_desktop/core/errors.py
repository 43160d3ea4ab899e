"""The one line between conditions of the world and bugs (qutebrowser's ``KnownError``/``BugError``).

A known error is something a person (or the model) can act on: a locked or corrupt file, a model
file that is not a GGUF, an unreachable server, a refused keyring.  Its ``str()`` is the complete
message to show, and no traceback is logged for it.  Anything else is a bug: its traceback goes to
the log, because that is what is needed to fix it.

Every error family of ``sqale_desktop.core`` derives from :class:`KnownError` (some also from the
built-in class they always had, so existing ``except RuntimeError``/``ValueError`` still catch
them); the window's workers, the episode loop's logging and the CLI ask :func:`is_known` rather than
each keeping its own list.
"""

from __future__ import annotations

import sqlite3


class KnownError(Exception):
    """A condition of the world, not a bug; ``str()`` is the message for people."""


class Cancelled(KnownError):
    """The person stopped the work (Stop, Cancel) before it finished: a choice, not a failure."""


def is_known(exc: BaseException) -> bool:
    """True for a condition of the world (show the message), False for a bug (log the traceback).

    Besides our own families, the operating system's refusals (a missing or unreadable file, a full
    disk) and SQLite's own errors are conditions of the world too: they reach here unwrapped when a
    file vanishes between two steps or a query is interrupted.
    """
    return isinstance(exc, KnownError | OSError | sqlite3.Error)
