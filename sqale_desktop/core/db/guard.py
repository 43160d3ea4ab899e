"""The authorizer allow-list that keeps every statement read-only.

SQLite calls the authorizer for each action a statement would take while it is being prepared, so
a statement that would write is refused before it runs.  Only reads, functions, recursive CTEs
and an explicit list of read-only pragmas are allowed; everything else is denied, including
ATTACH (which is also how ``VACUUM INTO`` starts) and ``load_extension``.  The connection is
opened with ``mode=ro`` and ``query_only`` as well, so a gap in this list still cannot write to
the user's file; the list is what turns such attempts into a clear message.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

import sqlparse

# Pragmas that only read, even when given an argument (the argument names a table or index).
_PRAGMAS_WITH_ARGUMENT = frozenset(
    {
        "table_info",
        "table_xinfo",
        "table_list",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "foreign_key_check",
        "integrity_check",
        "quick_check",
    }
)
# Pragmas that read a setting when given no argument and change it when given one.
_PRAGMAS_READ_WITHOUT_ARGUMENT = frozenset(
    {
        "application_id",
        "auto_vacuum",
        "cache_size",
        "collation_list",
        "compile_options",
        "data_version",
        "database_list",
        "encoding",
        "foreign_keys",
        "freelist_count",
        "function_list",
        "journal_mode",
        "module_list",
        "page_count",
        "page_size",
        "pragma_list",
        "query_only",
        "schema_version",
        "user_version",
    }
)
# Functions that reach outside the database or hand out raw pointers.
_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"})

_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_temp_master", "sqlite_schema", "sqlite_temp_schema"})
# Statements that change something; a failure of one of these is reported as a refusal.
WRITE_KEYWORDS = frozenset(
    {
        "INSERT",
        "UPDATE",
        "DELETE",
        "REPLACE",
        "CREATE",
        "DROP",
        "ALTER",
        "REINDEX",
        "ANALYZE",
        "ATTACH",
        "DETACH",
        "VACUUM",
        "BEGIN",
        "COMMIT",
        "END",
        "ROLLBACK",
        "SAVEPOINT",
        "RELEASE",
    }
)

_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})

_ACTION_NAMES: dict[int, str] = {
    sqlite3.SQLITE_INSERT: "INSERT",
    sqlite3.SQLITE_UPDATE: "UPDATE",
    sqlite3.SQLITE_DELETE: "DELETE",
    sqlite3.SQLITE_CREATE_INDEX: "CREATE INDEX",
    sqlite3.SQLITE_CREATE_TABLE: "CREATE TABLE",
    sqlite3.SQLITE_CREATE_TEMP_INDEX: "CREATE TEMP INDEX",
    sqlite3.SQLITE_CREATE_TEMP_TABLE: "CREATE TEMP TABLE",
    sqlite3.SQLITE_CREATE_TEMP_TRIGGER: "CREATE TEMP TRIGGER",
    sqlite3.SQLITE_CREATE_TEMP_VIEW: "CREATE TEMP VIEW",
    sqlite3.SQLITE_CREATE_TRIGGER: "CREATE TRIGGER",
    sqlite3.SQLITE_CREATE_VIEW: "CREATE VIEW",
    sqlite3.SQLITE_CREATE_VTABLE: "CREATE VIRTUAL TABLE",
    sqlite3.SQLITE_DROP_INDEX: "DROP INDEX",
    sqlite3.SQLITE_DROP_TABLE: "DROP TABLE",
    sqlite3.SQLITE_DROP_TEMP_INDEX: "DROP INDEX",
    sqlite3.SQLITE_DROP_TEMP_TABLE: "DROP TABLE",
    sqlite3.SQLITE_DROP_TEMP_TRIGGER: "DROP TRIGGER",
    sqlite3.SQLITE_DROP_TEMP_VIEW: "DROP VIEW",
    sqlite3.SQLITE_DROP_TRIGGER: "DROP TRIGGER",
    sqlite3.SQLITE_DROP_VIEW: "DROP VIEW",
    sqlite3.SQLITE_DROP_VTABLE: "DROP TABLE",
    sqlite3.SQLITE_ALTER_TABLE: "ALTER TABLE",
    sqlite3.SQLITE_REINDEX: "REINDEX",
    sqlite3.SQLITE_ANALYZE: "ANALYZE",
    sqlite3.SQLITE_ATTACH: "ATTACH",
    sqlite3.SQLITE_DETACH: "DETACH",
    sqlite3.SQLITE_TRANSACTION: "a transaction",
    sqlite3.SQLITE_SAVEPOINT: "SAVEPOINT",
}


@dataclass
class Denial:
    """What the authorizer refused first in the statement being prepared, for the error message."""

    what: str


class ReadOnlyGuard:
    """Authorizer callback for one connection; remembers the first refusal of each statement.

    One guard belongs to one connection, and a connection is used by one thread at a time, so
    ``last_denial`` needs no lock.  Call ``reset()`` before preparing a statement.
    """

    def __init__(self) -> None:
        self.last_denial: Denial | None = None

    def reset(self) -> None:
        self.last_denial = None

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, db_name: str | None, source: str | None
    ) -> int:
        verdict = _judge(action, arg1, arg2)
        if verdict is None:
            return sqlite3.SQLITE_OK
        if self.last_denial is None:
            self.last_denial = Denial(verdict)
        return sqlite3.SQLITE_DENY


def _judge(action: int, arg1: str | None, arg2: str | None) -> str | None:
    """None when the action is allowed, else the name of what was refused."""
    if action in _ALLOWED_ACTIONS:
        return None
    if action == sqlite3.SQLITE_FUNCTION:
        name = (arg2 or "").lower()
        return f"{name}()" if name in _DENIED_FUNCTIONS else None
    if action == sqlite3.SQLITE_PRAGMA:
        pragma = (arg1 or "").lower()
        if pragma in _PRAGMAS_WITH_ARGUMENT:
            return None
        if pragma in _PRAGMAS_READ_WITHOUT_ARGUMENT:
            return None if arg2 is None else f"setting PRAGMA {pragma}"
        return f"PRAGMA {pragma}"
    if action == sqlite3.SQLITE_UPDATE and (arg1 or "").lower() in _SCHEMA_TABLES:
        # Table-valued pragma functions (pragma_table_info(...)) ask for this while connecting
        # their virtual table.  A real UPDATE of the schema table is refused by SQLite itself
        # (writable_schema is a denied pragma), and the connection is mode=ro and query_only.
        return None
    if action == sqlite3.SQLITE_TRANSACTION and arg1:
        return arg1.upper()
    return _ACTION_NAMES.get(action, f"action {action}")


def denial_message(sql: str, denial: Denial) -> str:
    """The message for a statement the authorizer refused: ``read-only: INSERT is not allowed``."""
    return refuse_by_keyword(sql) or f"read-only: {denial.what} is not allowed"


# Characters handed to sqlparse's lexer: enough for the first words of any statement.  The
# lexer is slow per character (about 3 us) and its string-literal pattern can use memory in
# proportion to the literal, so it never sees more than this.
LEXER_WINDOW = 4096
_LEADING_SPACE = re.compile(r"\s*")


def skip_leading_noise(sql: str) -> int:
    """Where the first word of ``sql`` starts: whitespace and comments skipped, in linear time."""
    pos = 0
    while True:
        match = _LEADING_SPACE.match(sql, pos)
        pos = match.end() if match else pos
        if sql.startswith("--", pos):
            end = sql.find("\n", pos)
            pos = len(sql) if end < 0 else end + 1
        elif sql.startswith("/*", pos):
            end = sql.find("*/", pos + 2)
            pos = len(sql) if end < 0 else end + 2
        else:
            return pos


def leading_words(sql: str, count: int = 8) -> list[str]:
    """The first ``count`` words of ``sql``, upper-case, comments and whitespace skipped.

    Leading whitespace and comments are skipped without sqlparse; its lexer then reads at most
    ``LEXER_WINDOW`` characters, so the cost does not grow with the statement.
    """
    start = skip_leading_noise(sql)
    window = sql[start : start + LEXER_WINDOW]
    words: list[str] = []
    for ttype, value in sqlparse.lexer.tokenize(window):  # type: ignore[no-untyped-call]
        if ttype in sqlparse.tokens.Whitespace or ttype in sqlparse.tokens.Newline:
            continue
        if ttype in sqlparse.tokens.Comment or value.isspace():
            continue
        words.append(value.upper())
        if len(words) >= count:
            break
    return words


def leading_keyword(sql: str) -> str:
    """The first keyword of the statement, upper-case ('' if none)."""
    words = leading_words(sql, 1)
    return words[0] if words else ""


_OBJECT_WORDS = frozenset({"TABLE", "VIEW", "INDEX", "TRIGGER"})
_SKIPPED_WORDS = frozenset({"IF", "NOT", "EXISTS"})


def refuse_by_keyword(sql: str) -> str | None:
    """The refusal message when the statement itself is a write (before SQLite sees it), else None.

    The authorizer alone misses a few no-ops (``DROP VIEW IF EXISTS v`` on a missing view never
    asks it) and names the first internal action (an INSERT into ``sqlite_temp_master`` for
    ``CREATE TEMP TABLE``); reading the statement's own words fixes both.
    """
    words = leading_words(sql)
    if words[:1] == ["EXPLAIN"]:
        words = words[3:] if words[1:3] == ["QUERY", "PLAN"] else words[1:]
    if not words or words[0] not in WRITE_KEYWORDS:
        return None
    first = words[0]
    if first in {"CREATE", "DROP"}:
        phrase = [first]
        for word in words[1:5]:
            if word in _SKIPPED_WORDS:
                continue
            phrase.append(word)
            if word in _OBJECT_WORDS:
                break
        what = " ".join(phrase)
    elif first == "ALTER":
        what = "ALTER TABLE"
    elif first == "VACUUM":
        what = "VACUUM INTO" if "INTO" in words else "VACUUM"
    else:
        what = first
    return f"read-only: {what} is not allowed"
