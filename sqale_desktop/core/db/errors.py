"""Errors of the database layer: known conditions of the world, each with a message for people.

Every class here is a condition a user or the model can act on (wrong file, corrupt file, a write
attempt, a slow query), so ``str()`` is a complete sentence that names the file or the statement.
Bugs are not wrapped in these classes: they keep their traceback.
"""

from __future__ import annotations

from sqale_desktop.core.errors import KnownError


class DatabaseError(KnownError):
    """Base of every database-layer condition; ``str()`` is the message to show."""


class NotADatabase(DatabaseError):
    """The file exists but is not a SQLite database (wrong format, empty, a folder)."""


class CorruptDatabase(DatabaseError):
    """The file is a SQLite database whose pages or schema cannot be read."""


class DatabaseUnreadable(DatabaseError):
    """The file cannot be opened at all: missing, no permission, locked, unreadable folder."""


class DatabaseLocked(DatabaseUnreadable):
    """Another program holds the file locked (writing, or exclusive locking mode) past the time limit."""


class QueryDenied(DatabaseError):
    """The statement would write or escape the read-only sandbox ("read-only: INSERT is not allowed")."""


class QueryTimeout(DatabaseError):
    """The statement ran past the time limit and was stopped; the connection stays usable."""


class QueryInterrupted(DatabaseError):
    """The statement was cancelled with ``interrupt()``; the connection stays usable."""


class QueryFailed(DatabaseError):
    """SQLite rejected or could not run the statement (syntax error, no such column, ...)."""


class StatementTooLong(QueryFailed):
    """The statement's text is longer than any question needs; refused before it is parsed."""


class ResultTooLarge(QueryFailed):
    """The rows made so far hold more bytes than one result may keep in memory."""


class QueryOutOfMemory(QueryFailed):
    """The statement needed more memory than the database worker may use (its cap) and was stopped."""


class WorkerCrashed(QueryFailed):
    """The database worker died under the statement (a crash in SQLite or a function it called);
    the app is unharmed and the next statement gets a fresh worker."""
