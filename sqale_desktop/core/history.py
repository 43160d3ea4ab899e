"""The app's own SQLite store of conversations and their episodes (``<data dir>/history.sqlite``).

One conversation per database file (keyed by its resolved path).  A conversation holds entries in
the order they happened: questions, each with the full episode trace once it finishes, and the SQL
reruns the user made after editing a query.

Crash safety: the file is in WAL mode with ``synchronous = FULL`` and every change is its own
transaction.  A question is committed as ``running`` before its episode starts and the finished
episode is committed in one transaction, so a crash or kill loses at most the episode in flight; the
next :class:`History` opened on the file marks such entries ``interrupted``.

Several windows (app processes) share the file, so "running" alone does not mean "lost": each
entry records its owner, a token of the process that started it, and each process holds a lock file
named by its token (``history-owners/<token>.lock``) for as long as it lives.  The operating system
drops the lock when the process ends, however it ends (a crash, a kill -9), so a start marks
``interrupted`` only the entries whose owner's lock can be taken, and leaves another live window's
running episode alone.  Within one process, a new ``History`` is a new app start (open one per app
start, not one per window): the entries an earlier one of this process left running are marked.

Threads: every method opens its own short-lived connection, uses it and closes it, so a connection
never leaves the thread that opened it (the house rule) and any thread of the UI's pool may call any
method.  WAL lets readers run beside the one writer; writers start with ``BEGIN IMMEDIATE`` and wait
up to :data:`BUSY_TIMEOUT_S` for each other, which a history write (milliseconds) never approaches.
Opening a connection costs well under a millisecond, far less than anything around a question.

Schema changes go through :data:`MIGRATIONS`: step ``i`` turns version ``i`` into ``i + 1``
(``PRAGMA user_version``), each step in its own transaction.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import json
import os
import re
import sqlite3
import threading
import types
import typing
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import filelock

from sqale_desktop.core import paths
from sqale_desktop.core.agent.events import Episode
from sqale_desktop.core.agent.followup import Thread, ThreadError
from sqale_desktop.core.errors import KnownError

BUSY_TIMEOUT_S = 10.0

EntryKind = Literal["question", "rerun"]
EntryState = Literal["running", "finished", "interrupted"]


class HistoryError(KnownError):
    """A known condition of the history file (unreadable, from a newer version): tell the user."""


@dataclass(frozen=True)
class Conversation:
    id: int
    db_path: str  # resolved path of the database the conversation is about
    title: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Entry:
    """One step of a conversation: a question (with its episode once finished) or an SQL rerun."""

    id: int
    conversation_id: int
    kind: EntryKind
    state: EntryState
    created_at: datetime
    finished_at: datetime | None
    question: str | None = None  # question entries
    sql: str | None = None  # the episode's answer, or the rerun's query
    ended_by: str | None = None  # question entries: how the episode ended
    row_count: int | None = None
    error: str | None = None  # a rerun's error, or why a stored episode could not be read back
    episode: Episode | None = None  # finished question entries
    source_entry_id: int | None = None  # a rerun: the entry whose SQL the user edited
    duration_ms: int | None = None  # a rerun: how long the statement took to its first page
    parent_entry_id: int | None = None  # a follow-up question: the entry whose thread it continued
    db_fingerprint: str | None = None  # a question: the database as it was asked on (:func:`fingerprint`)
    model: str | None = None  # a question: the model that answered it (``Runtime.thread_model``)


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE conversations (
            id         INTEGER PRIMARY KEY,
            db_path    TEXT NOT NULL UNIQUE,
            title      TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE entries (
            id              INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            kind            TEXT NOT NULL CHECK (kind IN ('question', 'rerun')),
            state           TEXT NOT NULL CHECK (state IN ('running', 'finished', 'interrupted')),
            question        TEXT,
            sql             TEXT,
            ended_by        TEXT,
            row_count       INTEGER,
            error           TEXT,
            episode_json    TEXT,
            source_entry_id INTEGER REFERENCES entries (id) ON DELETE SET NULL,
            created_at      TEXT NOT NULL,
            finished_at     TEXT
        )
        """
    )
    conn.execute("CREATE INDEX entries_conversation ON entries (conversation_id, id)")
    conn.execute("CREATE INDEX entries_running ON entries (state) WHERE state = 'running'")


Migration = Callable[[sqlite3.Connection], None]


def _v2(conn: sqlite3.Connection) -> None:
    """Reruns keep their duration, for the query-history panel (issue 13)."""
    conn.execute("ALTER TABLE entries ADD COLUMN duration_ms INTEGER")


def _v3(conn: sqlite3.Connection) -> None:
    """Running entries name the process that owns them (see the module docstring)."""
    conn.execute("ALTER TABLE entries ADD COLUMN owner TEXT")


def _v4(conn: sqlite3.Connection) -> None:
    """Follow-up questions (issue 29): the entry a question follows up, and what its thread
    depends on (the database's size and modification time, the model that wrote it)."""
    conn.execute(
        "ALTER TABLE entries ADD COLUMN parent_entry_id INTEGER REFERENCES entries (id) ON DELETE SET NULL"
    )
    conn.execute("ALTER TABLE entries ADD COLUMN db_fingerprint TEXT")
    conn.execute("ALTER TABLE entries ADD COLUMN model TEXT")


MIGRATIONS: list[Migration] = [_v1, _v2, _v3, _v4]
"""Step ``i`` migrates schema version ``i`` to ``i + 1``; append a step to change the schema."""


def default_history_path() -> Path:
    return paths.data_dir() / "history.sqlite"


class History:
    """The conversation store; cheap to call from any thread (see the module docstring)."""

    def __init__(self, path: Path | None = None) -> None:
        """Open (creating or migrating) the store and mark episodes a previous run left unfinished.

        Raises :class:`HistoryError` when the file is not a readable database or comes from a newer
        version of the app.
        """
        self.path = default_history_path() if path is None else Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._owners = _owners_for(self.path.parent / OWNERS_DIR)
        try:
            with self._connect() as conn:
                conn.execute("PRAGMA journal_mode = WAL")
                _migrate(conn, MIGRATIONS)
                with _immediate(conn):
                    running = conn.execute("SELECT id, owner FROM entries WHERE state = 'running'")
                    ids = [entry for entry, owner in running.fetchall() if not self._owners.alive(owner)]
                    now = _now()
                    conn.executemany(
                        "UPDATE entries SET state = 'interrupted', finished_at = ? WHERE id = ?",
                        [(now, entry) for entry in ids],
                    )
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"the history file {self.path} cannot be used: {exc}") from exc
        self._owners.forget_dead()
        self.interrupted_at_start: tuple[int, ...] = tuple(ids)
        """Entries that were running when the app last stopped (the UI may say so)."""

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = FULL")  # a committed episode survives a power cut
            yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as conn, _immediate(conn):
            yield conn

    def list_conversations(self) -> list[Conversation]:
        """All conversations, most recently active first."""
        with self._connect() as conn:
            query = f"SELECT {_CONVERSATION_COLUMNS} ORDER BY updated_at DESC, id DESC"
            rows = conn.execute(query).fetchall()
        return [_conversation(row) for row in rows]

    def conversation_for(self, db_path: Path | str, title: str | None = None) -> Conversation:
        """The conversation about ``db_path``, created (titled ``title`` or the file name) if new."""
        key = str(Path(db_path).expanduser().resolve())
        now = _now()
        with self._write() as conn:
            conn.execute(
                "INSERT INTO conversations (db_path, title, created_at, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (db_path) DO NOTHING",
                (key, title or Path(key).name, now, now),
            )
            row = conn.execute(f"SELECT {_CONVERSATION_COLUMNS} WHERE db_path = ?", (key,)).fetchone()
        return _conversation(row)

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        with self._write() as conn:
            _check(conn.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id)))

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation and all its entries."""
        with self._write() as conn:
            _check(conn.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,)))

    def add_question(
        self,
        conversation_id: int,
        question: str,
        *,
        parent_entry_id: int | None = None,
        db_fingerprint: str | None = None,
        model: str | None = None,
    ) -> int:
        """Record a question as ``running`` before its episode starts; returns the entry id.

        ``parent_entry_id``: the question it follows up; ``db_fingerprint`` and ``model``: what
        a later follow-up on it checks (:meth:`thread`).
        """
        now = _now()
        with self._write() as conn:
            entry_id = _insert_entry(
                conn,
                conversation_id,
                now,
                kind="question",
                state="running",
                question=question,
                owner=self._owners.token,
                parent_entry_id=parent_entry_id,
                db_fingerprint=db_fingerprint,
                model=model,
            )
        return entry_id

    def last_answer(self, db_path: Path | str) -> Entry | None:
        """The latest finished question of ``db_path``'s conversation (None: there is none)."""
        key = str(Path(db_path).expanduser().resolve())
        with self._connect() as conn:
            conn.row_factory = sqlite3.Row
            row = conn.execute(
                "SELECT entries.* FROM entries JOIN conversations ON conversations.id = conversation_id "
                "WHERE db_path = ? AND kind = 'question' AND state = 'finished' "
                "AND ended_by NOT IN ('cancelled', 'error') ORDER BY entries.id DESC LIMIT 1",
                (key,),
            ).fetchone()
        return None if row is None else _entry(row)

    def thread(self, entry_id: int, db_path: Path | str, model: str | None = None) -> Thread:
        """The thread a follow-up on entry ``entry_id`` continues, asked on ``db_path`` by ``model``.

        Raises :class:`~sqale_desktop.core.agent.followup.ThreadError` with a message for people:
        no such question, one that did not finish, a damaged stored thread, another database (or
        the same one changed since, or gone), another model.
        """
        try:
            entry = self.entry(entry_id)
        except KeyError:
            raise ThreadError(f"there is no episode {entry_id} in the history") from None
        if entry.kind != "question":
            raise ThreadError(f"entry {entry_id} is an SQL run, not an answer to follow up")
        if entry.state != "finished":
            raise ThreadError(
                f"episode {entry_id} never finished ({entry.state}): follow up a finished answer"
            )
        if entry.episode is None:
            raise ThreadError(
                f"the stored thread of episode {entry_id} is damaged: {entry.error or 'it is empty'}"
            )
        with self._connect() as conn:
            row = conn.execute(
                "SELECT db_path FROM conversations WHERE id = ?", (entry.conversation_id,)
            ).fetchone()
        asked_on = Path(row[0]) if row is not None else None
        here = Path(db_path).expanduser().resolve()
        if asked_on is not None and asked_on != here:
            raise ThreadError(f"episode {entry_id} was asked on {asked_on}, not on {here}")
        if not here.exists():
            raise ThreadError(f"the database of episode {entry_id} is gone: {here}")
        if entry.db_fingerprint is not None and entry.db_fingerprint != fingerprint(here):
            raise ThreadError(
                f"the database {here.name} has changed since episode {entry_id} was answered: its "
                "thread may describe tables and rows that are no longer there; ask a standalone question"
            )
        if model is not None and entry.model is not None and entry.model != model:
            raise ThreadError(
                f"episode {entry_id} was answered by {entry.model}, not by {model}: a thread is "
                "continued only by the model that wrote it; ask a standalone question or choose that model"
            )
        if entry.episode.ended_by in ("cancelled", "error"):
            reason = "was stopped" if entry.episode.ended_by == "cancelled" else "ended in an error"
            raise ThreadError(f"episode {entry_id} {reason}: follow up a finished answer")
        try:
            return Thread.of(entry.episode)
        except ThreadError as exc:
            raise ThreadError(f"the stored thread of episode {entry_id} is damaged ({exc})") from None

    def finish_episode(self, entry_id: int, episode: Episode) -> None:
        """Store the finished (or cancelled, or failed) episode of a question, in one transaction."""
        text = json.dumps(episode.to_json(), ensure_ascii=False, default=_encode_extra)
        row_count = episode.result.row_count if episode.result is not None else None
        now = _now()
        with self._write() as conn:
            _check(
                conn.execute(
                    "UPDATE entries SET state = 'finished', sql = ?, ended_by = ?, row_count = ?, error = ?, "
                    "episode_json = ?, finished_at = ? WHERE id = ? AND kind = 'question'",
                    (episode.sql, episode.ended_by, row_count, episode.error, text, now, entry_id),
                )
            )
            _touch(conn, "(SELECT conversation_id FROM entries WHERE id = ?)", entry_id, now)

    def add_rerun(
        self,
        conversation_id: int,
        sql: str,
        *,
        row_count: int | None = None,
        error: str | None = None,
        source_entry_id: int | None = None,
        duration_ms: int | None = None,
    ) -> int:
        """Record a query the user ran by hand (edited or typed); returns the entry id."""
        now = _now()
        with self._write() as conn:
            entry_id = _insert_entry(
                conn,
                conversation_id,
                now,
                kind="rerun",
                state="finished",
                sql=sql,
                row_count=row_count,
                error=error,
                source_entry_id=source_entry_id,
                finished_at=now,
                duration_ms=duration_ms,
            )
        return entry_id

    def entries(self, conversation_id: int) -> list[Entry]:
        """The entries of a conversation in the order they were made, episodes loaded back."""
        with self._connect() as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute(
                "SELECT * FROM entries WHERE conversation_id = ? ORDER BY id", (conversation_id,)
            ).fetchall()
        return [_entry(row) for row in rows]

    def entry(self, entry_id: int) -> Entry:
        """One entry by id; :class:`KeyError` when there is none."""
        with self._connect() as conn:
            conn.row_factory = sqlite3.Row
            row = conn.execute("SELECT * FROM entries WHERE id = ?", (entry_id,)).fetchone()
        if row is None:
            raise KeyError(entry_id)
        return _entry(row)


OWNERS_DIR = "history-owners"
_TOKEN = re.compile(r"[0-9]+-[0-9a-f]{16}")


class _Owners:
    """This process's owner token, the lock that says it is alive, and the test for other tokens."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.token = f"{os.getpid()}-{uuid.uuid4().hex[:16]}"
        folder.mkdir(parents=True, exist_ok=True)
        self._lock = filelock.FileLock(folder / f"{self.token}.lock", timeout=0)
        self._lock.acquire()  # held until the process ends; a fresh name, so never contended

    def alive(self, owner: str | None) -> bool:
        """Whether the process behind ``owner`` still runs (never: an entry of this process, left
        by an earlier ``History`` of it, or of a version that recorded no owner)."""
        if owner is None or owner == self.token or not _TOKEN.fullmatch(owner):
            return False
        return not _take(self.folder / f"{owner}.lock")

    def forget_dead(self) -> None:
        """Remove the lock files of processes that have ended (one is left per app start)."""
        for path in self.folder.glob("*.lock"):
            if path.stem != self.token and _take(path):
                with contextlib.suppress(OSError):
                    path.unlink()


def _take(path: Path) -> bool:
    """Whether the lock at ``path`` is free (its process has ended); a missing file is free."""
    if not path.exists():
        return True
    probe = filelock.FileLock(path, timeout=0)
    try:
        probe.acquire()
    except filelock.Timeout:
        return False
    except OSError:
        return False  # not ours to open: leave it, and its entries, alone
    probe.release()
    return True


_OWNERS: dict[Path, _Owners] = {}
_OWNERS_LOCK = threading.Lock()


def _owners_for(folder: Path) -> _Owners:
    """One owner per process and folder: every ``History`` of this process writes the same token."""
    with _OWNERS_LOCK:
        owners = _OWNERS.get(folder)
        if owners is None:
            owners = _OWNERS[folder] = _Owners(folder)
        return owners


@contextlib.contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction that takes the write lock up front, so concurrent writers queue, not fail."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _migrate(conn: sqlite3.Connection, migrations: list[Migration]) -> None:
    latest = len(migrations)
    while True:
        with _immediate(conn):
            # Read inside the transaction: another process may have migrated meanwhile.
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > latest:
                raise HistoryError(
                    f"the history file was written by a newer SQaLe Desktop (schema {version}, this one "
                    f"knows up to {latest})"
                )
            if version == latest:
                return
            migrations[version](conn)
            conn.execute(f"PRAGMA user_version = {version + 1}")


def _insert_entry(conn: sqlite3.Connection, conversation_id: int, now: str, **values: Any) -> int:
    columns = ["conversation_id", "created_at", *values]
    try:
        cursor = conn.execute(
            f"INSERT INTO entries ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            (conversation_id, now, *values.values()),
        )
    except sqlite3.IntegrityError as exc:
        raise KeyError(conversation_id) from exc
    _touch(conn, "?", conversation_id, now)
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def _touch(conn: sqlite3.Connection, id_expression: str, key: int, now: str) -> None:
    conn.execute(f"UPDATE conversations SET updated_at = ? WHERE id = {id_expression}", (now, key))


def _check(cursor: sqlite3.Cursor) -> None:
    """A write that matched no row names an id that does not exist: a bug in the caller."""
    if cursor.rowcount == 0:
        raise KeyError("no such conversation or entry")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


_CONVERSATION_COLUMNS = "id, db_path, title, created_at, updated_at FROM conversations"


def _conversation(row: tuple[Any, ...]) -> Conversation:
    conversation_id, db_path, title, created, updated = row
    return Conversation(
        conversation_id, db_path, title, datetime.fromisoformat(created), datetime.fromisoformat(updated)
    )


def _entry(row: sqlite3.Row) -> Entry:
    episode = None
    error = row["error"]
    if row["episode_json"] is not None:
        try:
            episode = episode_from_json(json.loads(row["episode_json"], object_hook=_decode_extra))
        except (ValueError, TypeError) as exc:
            error = f"the stored episode could not be read back: {exc}"
    return Entry(
        id=row["id"],
        conversation_id=row["conversation_id"],
        kind=row["kind"],
        state=row["state"],
        created_at=datetime.fromisoformat(row["created_at"]),
        finished_at=None if row["finished_at"] is None else datetime.fromisoformat(row["finished_at"]),
        question=row["question"],
        sql=row["sql"],
        ended_by=row["ended_by"],
        row_count=row["row_count"],
        error=error,
        episode=episode,
        source_entry_id=row["source_entry_id"],
        duration_ms=row["duration_ms"],
        parent_entry_id=row["parent_entry_id"],
        db_fingerprint=row["db_fingerprint"],
        model=row["model"],
    )


def fingerprint(db_path: Path | str) -> str | None:
    """A database file as it is now (size and modification time), None when it cannot be read.

    A follow-up compares it with the one its thread was asked on: a database changed since may
    no longer hold what the thread read from it.
    """
    try:
        info = Path(db_path).stat()
    except OSError:
        return None
    return f"{info.st_size}:{info.st_mtime_ns}"


# Result rows may hold BLOBs, which JSON cannot: they travel as {"$bytes": "<base64>"}.
_BYTES_KEY = "$bytes"


def _encode_extra(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return {_BYTES_KEY: base64.b64encode(bytes(value)).decode("ascii")}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _decode_extra(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and isinstance(obj.get(_BYTES_KEY), str):
        return base64.b64decode(obj[_BYTES_KEY])
    return obj


def episode_from_json(data: dict[str, Any]) -> Episode:
    """Rebuild an :class:`Episode` from ``Episode.to_json()`` output (after a JSON round trip).

    Works from the dataclasses' own type hints, so fields added to the events module later are
    loaded without changes here; keys this version does not know are ignored and missing ones take
    their defaults (traces written by other versions still load).  Raises ``ValueError`` when a
    required field is missing or a value has the wrong shape.
    """
    episode = _build(Episode, data)
    assert isinstance(episode, Episode)
    return episode


def _build(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        return _build(options[0], value) if len(options) == 1 else value
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"expected a list, got {type(value).__name__}")
        (item_type,) = typing.get_args(tp)
        return [_build(item_type, item) for item in value]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ValueError(f"expected an object for {tp.__name__}, got {type(value).__name__}")
        hints = _field_types(tp)
        try:
            return tp(**{name: _build(hints[name], item) for name, item in value.items() if name in hints})
        except TypeError as exc:
            raise ValueError(f"cannot build {tp.__name__}: {exc}") from exc
    return value


@functools.cache
def _field_types(tp: type) -> dict[str, Any]:
    """The resolved types of a dataclass's constructor fields (resolving them is slow: cached)."""
    hints = typing.get_type_hints(tp)
    return {f.name: hints[f.name] for f in dataclasses.fields(tp) if f.init}
