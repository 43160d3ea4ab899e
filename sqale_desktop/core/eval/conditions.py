"""Schema-size conditions (the paper's Figure 8): gold tables only, plus K distractors, or the full schema.

A reduced database is a new SQLite file in the app's cache, never next to the source, which is
only ever opened by the core's read-only path (``open_readonly`` / ``connect_readonly``: ``mode=ro``,
or ``immutable=1`` where the opening rules say so, and the ``-shm`` a WAL source gets removed
afterwards as for any open).  It holds the chosen tables with every row (values keep their exact
storage class and bytes), their indexes, and the foreign keys whose both ends remain: a reference to
a table that was left out is cut from the ``CREATE TABLE`` text, found with sqlglot's SQLite
tokenizer, so every other byte of the original statement is kept (regenerating the DDL from a parse
tree would turn ``INTEGER PRIMARY KEY`` into ``INT PRIMARY KEY`` and lose the rowid alias).
Views and triggers are left out: they may name tables that are not there.  A virtual table is
copied as a plain table of its data (an FTS index's shadow tables are not copied, nor offered as
distractors); one whose module SQLite lacks (``vec0``, spatialite's) cannot be read and is left
out, and a gold query that needs it gets an error naming it.

The source's expressions are never evaluated unguarded: ``CHECK`` constraints not at all (the rows
were checked when they were written), and what the copy must evaluate (stored generated columns,
expression and partial indexes, a virtual table's module, a ``DEFAULT`` on ``ON CONFLICT REPLACE``)
runs in a child process under the time limit and Stop: every build does (``build_reduced``,
``reduce_child``).

Distractors are chosen as the model card describes the training sampler: grown from the gold
tables along foreign keys (breadth first, each ring in random order) until K are added, then filled
at random from the rest; the tables are then shuffled, so the order ``list_tables`` shows gives
nothing away.  Choices are seeded per question, so a resumed run builds the same database.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import re
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.eval import sql_facts

if TYPE_CHECKING:
    from sqlglot.tokenizer_core import Token

_log = logging.getLogger(__name__)

DEFAULT_DISTRACTORS = 32
DEFAULT_BUILD_TIME_LIMIT_S = 30.0  # per statement of a build, as the scorer's default query limit
CHILD_START_S = 120.0
CHILD_MODULE = "sqale_desktop.core.eval.reduce_child"
ConditionKind = Literal["gold", "distractors", "full"]


class ConditionError(KnownError):
    """A condition that cannot be parsed or a database that cannot be reduced; the message says why."""


@dataclass(frozen=True)
class Condition:
    kind: ConditionKind
    distractors: int = 0

    @property
    def label(self) -> str:
        return f"distractors:{self.distractors}" if self.kind == "distractors" else self.kind


def parse_condition(text: str) -> Condition:
    """``gold``, ``full``, ``distractors`` (32) or ``distractors:K``."""
    name, _, count = text.strip().partition(":")
    if name == "gold" and not count:
        return Condition("gold")
    if name == "full" and not count:
        return Condition("full")
    if name == "distractors":
        if not count:
            return Condition("distractors", DEFAULT_DISTRACTORS)
        if count.isdigit():
            return Condition("distractors", int(count))
    raise ConditionError(f"unknown condition {text!r}: use gold, distractors:K or full")


@dataclass(frozen=True)
class SourceSchema:
    """The copyable tables of a source database in file order and its foreign-key graph.

    ``ddl`` is ``None`` for a virtual table (copied as a plain table of its columns, since the copy
    must not depend on the module).  ``uncopyable`` names the tables left out and why (a virtual
    table whose module this SQLite lacks); shadow tables (an FTS index's own storage) are not
    tables of the schema at all.  ``collations``: names the schema uses that SQLite lacks.
    ``expressions``: some copied object evaluates an expression of the source when it is built
    (a stored generated column, an index on an expression or with a ``WHERE``, a virtual table's
    module), so the copy is made in a child process (see ``build_reduced``).
    """

    tables: list[str]
    ddl: dict[str, str | None]
    neighbours: dict[str, set[str]]
    references: dict[str, set[str]]  # table -> the tables its foreign keys point to
    uncopyable: dict[str, str] = field(default_factory=dict)
    indexes: list[tuple[str, str, str]] = field(default_factory=list)  # (table, name, sql)
    collations: list[str] = field(default_factory=list)
    expressions: frozenset[str] = frozenset()  # tables whose copy evaluates source expressions


_VIRTUAL = re.compile(r"\s*CREATE\s+VIRTUAL\s+TABLE\b", re.IGNORECASE)
_MODULE = re.compile(r"\bUSING\s+([A-Za-z_]\w*)", re.IGNORECASE)
_COLLATE = re.compile(r"""\bCOLLATE\s+("[^"]+"|'[^']+'|`[^`]+`|\[[^\]]+\]|\w+)""", re.IGNORECASE)


def read_schema(conn: sqlite3.Connection) -> SourceSchema:
    """The source's schema as the reduced copies need it (see ``SourceSchema``)."""
    rows = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND sql IS NOT NULL ORDER BY rowid"
    ).fetchall()
    kinds = _table_kinds(conn)
    modules = _names(conn, "SELECT name FROM pragma_module_list")
    virtual = {str(name): str(sql) for name, sql in rows if _VIRTUAL.match(str(sql))}
    prefixes = tuple(name.lower() + "_" for name in virtual)
    tables: list[str] = []
    ddl: dict[str, str | None] = {}
    uncopyable: dict[str, str] = {}
    expressions: set[str] = set()
    for raw_name, raw_sql in rows:
        name, sql = str(raw_name), str(raw_sql)
        if kinds.get(name) == "shadow" or (name not in virtual and name.lower().startswith(prefixes)):
            continue  # an FTS (or other module's) own storage: rebuilt by the module, never a table
        if name in virtual:
            module = _MODULE.search(sql)
            module_name = module.group(1) if module else "?"
            if module_name.lower() not in modules:
                uncopyable[name] = (
                    f"it is a virtual table of the module {module_name}, which SQLite lacks here"
                )
                continue
            expressions.add(name)
            ddl[name] = None
        else:
            ddl[name] = sql
            if _has_generated_columns(conn, name):
                expressions.add(name)
        tables.append(name)
    by_lower = {t.lower(): t for t in tables}
    neighbours: dict[str, set[str]] = {t: set() for t in tables}
    references: dict[str, set[str]] = {t: set() for t in tables}
    for table in tables:
        if ddl[table] is None:
            continue  # a virtual table has no foreign keys
        for fk in conn.execute("SELECT * FROM pragma_foreign_key_list(?)", (table,)).fetchall():
            parent = by_lower.get(str(fk[2]).lower())
            if parent is None:
                continue
            references[table].add(parent)
            if parent != table:
                neighbours[table].add(parent)
                neighbours[parent].add(table)
    indexes = [
        (str(table), str(name), str(sql))
        for table, name, sql in conn.execute(
            "SELECT tbl_name, name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        )
        if str(table) in ddl
    ]
    for table, name, _sql in indexes:
        if _index_evaluates(conn, table, name):
            expressions.add(table)
    used = {m.strip("\"'`[]") for text in [*filter(None, ddl.values()), *(i[2] for i in indexes)]
            for m in _COLLATE.findall(text)}  # fmt: skip
    collations = sorted(name for name in used if not _has_collation(conn, name))
    return SourceSchema(
        tables, ddl, neighbours, references, uncopyable, indexes, collations, frozenset(expressions)
    )


def _table_kinds(conn: sqlite3.Connection) -> dict[str, str]:
    """``PRAGMA table_list``'s type per table (``shadow`` for a module's storage; SQLite 3.37+)."""
    try:
        rows = conn.execute("SELECT name, type FROM pragma_table_list WHERE schema = 'main'")
        return {str(name): str(kind) for name, kind in rows}
    except sqlite3.Error:
        return {}  # older SQLite: the name rule (``<virtual table>_...``) finds shadow tables


def _has_collation(conn: sqlite3.Connection, name: str) -> bool:
    """Whether SQLite can compare with collation ``name`` (``pragma_collation_list`` also lists a
    name the schema merely mentions, so it cannot tell)."""
    try:
        conn.execute(f"SELECT 'a' < 'b' COLLATE {_quote(name)}").fetchone()
    except sqlite3.Error:
        return False
    return True


def _names(conn: sqlite3.Connection, query: str) -> set[str]:
    try:
        return {str(row[0]).lower() for row in conn.execute(query)}
    except sqlite3.Error:
        return set()


def _has_generated_columns(conn: sqlite3.Connection, table: str) -> bool:
    try:
        return any(row[6] in (2, 3) for row in conn.execute("SELECT * FROM pragma_table_xinfo(?)", (table,)))
    except sqlite3.Error:
        return True  # cannot tell: treat it as evaluating (the child copies it, or says why not)


def _index_evaluates(conn: sqlite3.Connection, table: str, index: str) -> bool:
    """Whether building ``index`` evaluates expressions: a column that is an expression (cid -2)
    or a partial index's ``WHERE``."""
    try:
        if any(row[1] == -2 for row in conn.execute("SELECT * FROM pragma_index_xinfo(?)", (index,))):
            return True
        partial = conn.execute("SELECT partial FROM pragma_index_list(?) WHERE name = ?", (table, index))
        return any(row[0] for row in partial)
    except sqlite3.Error:
        return True


def gold_tables(gold_sql: str, schema: SourceSchema) -> list[str]:
    """The source's tables that the gold query reads, in file order (names as the file spells them)."""
    wanted = sql_facts.tables(gold_sql)
    return [t for t in schema.tables if t.lower() in wanted]


def choose_tables(
    schema: SourceSchema, gold: Sequence[str], condition: Condition, rng: random.Random
) -> list[str]:
    """The tables of the reduced database, shuffled (see the module docstring)."""
    kept = list(dict.fromkeys(gold))
    if condition.kind == "full":
        kept = list(schema.tables)
    elif condition.kind == "distractors":
        seen = set(kept)
        wanted = condition.distractors
        added = 0
        ring = list(kept)
        while added < wanted:
            nxt = sorted({n for table in ring for n in schema.neighbours[table]} - seen)
            if not nxt:
                break
            rng.shuffle(nxt)
            nxt = nxt[: wanted - added]
            kept.extend(nxt)
            seen.update(nxt)
            added += len(nxt)
            ring = nxt
        if added < wanted:
            rest = [t for t in schema.tables if t not in seen]
            rng.shuffle(rest)
            kept.extend(rest[: wanted - added])
    rng.shuffle(kept)
    return kept


def question_rng(seed: int, question_key: str) -> random.Random:
    """A random source fixed by the run's seed and the question, independent of run order."""
    digest = hashlib.sha256(f"{seed}|{question_key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def prepare_database(
    source: Path,
    gold_sql: str,
    condition: Condition,
    *,
    seed: int,
    question_key: str,
    cache: Path,
    time_limit_s: float = DEFAULT_BUILD_TIME_LIMIT_S,
    cancel: threading.Event | None = None,
    on_step: Callable[[str], None] | None = None,
) -> tuple[Path, list[str]]:
    """The database an episode runs on under ``condition``, and the gold tables found in it.

    ``full`` is the source itself (opened read-only by the episode); the others are reduced
    copies under ``cache``, built once and reused: the file name is a digest of the source's
    content (its bytes and its ``-wal``'s, see ``content_digest``) and the chosen tables in order.
    Building runs each statement under ``time_limit_s`` and stops on ``cancel`` (see
    ``build_reduced``); ``on_step`` hears each step as it starts (``"table t"``, ``"index i"``).
    """
    from sqale_desktop.core.db import DatabaseError, open_readonly
    from sqale_desktop.core.db.opening import connect_readonly

    try:
        # The core's own open: it counts this handle, so a -shm (and an empty -wal) that reading a
        # WAL source creates is removed when it closes (core/db/shm.py), after the build below.
        probe = open_readonly(source)
    except DatabaseError as exc:
        raise ConditionError(str(exc)) from None
    try:
        conn = connect_readonly(source, immutable=probe.immutable)
        try:
            schema = read_schema(conn)
        except sqlite3.Error as exc:
            raise ConditionError(f"cannot read the schema of {source.name}: {exc}") from None
        finally:
            conn.close()
        gold = gold_tables(gold_sql, schema)
        if condition.kind == "full":
            return source, gold
        wanted = sql_facts.tables(gold_sql)
        for table, reason in schema.uncopyable.items():
            if table.lower() in wanted:
                raise ConditionError(
                    f"{source.name}: the gold table {table} cannot be copied into a reduced "
                    f"database: {reason}"
                )
        tables = choose_tables(schema, gold, condition, question_rng(seed, question_key))
        identity = content_digest(source) + "|" + "\x00".join(tables)
        target = cache / f"{source.stem}-{hashlib.sha256(identity.encode()).hexdigest()[:20]}.sqlite"
        if not target.is_file():
            build_reduced(
                source,
                probe.immutable,
                schema,
                tables,
                target,
                required=gold,
                time_limit_s=time_limit_s,
                cancel=cancel,
                on_step=on_step,
            )
        return target, gold
    finally:
        probe.close()


_digests: dict[tuple[object, ...], str] = {}
_digests_lock = threading.Lock()


def content_digest(source: Path) -> str:
    """A digest of what a reader of ``source`` sees: the bytes of the file and of its ``-wal``.

    Another program's commit may sit in the ``-wal`` with the main file's size and modification
    time unchanged, so those cannot key the cache.  Hashing is memoized per (inode, size,
    modification and change time) of both files: the change time moves with every write and
    cannot be set back, so an unchanged pair is hashed once per process, however many questions
    ask about it.
    """
    files = [source, source.with_name(source.name + "-wal")]
    stats: list[object] = []
    for path in files:
        try:
            info = path.stat()
        except FileNotFoundError:
            stats.append(None)
            continue
        except OSError as exc:
            raise ConditionError(f"cannot read {path}: {exc.strerror or exc}") from None
        stats.append((str(path.resolve()), info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
    key = tuple(stats)
    with _digests_lock:
        known = _digests.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    for path, stat in zip(files, stats, strict=True):
        digest.update(b"\x00file\x00" if stat is not None else b"\x00none\x00")
        if stat is None:
            continue
        try:
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        except OSError as exc:
            raise ConditionError(f"cannot read {path}: {exc.strerror or exc}") from None
    text = digest.hexdigest()
    with _digests_lock:
        _digests[key] = text
    return text


def build_reduced(
    source: Path,
    immutable: bool,
    schema: SourceSchema,
    tables: Sequence[str],
    target: Path,
    *,
    required: Iterable[str] = (),
    time_limit_s: float = DEFAULT_BUILD_TIME_LIMIT_S,
    cancel: threading.Event | None = None,
    on_step: Callable[[str], None] | None = None,
) -> None:
    """Write ``tables`` (in this order) of the source into a new file ``target``, atomically.

    Each statement (a table's copy, an index) runs under ``time_limit_s`` and stops on ``cancel``.
    The build always runs in a child process (``reduce_child``, started by ``core.child``), killed
    when a statement outlives the limit by the kit's grace or at once on ``cancel``: one SQLite C
    call (a ``printf`` or ``trim`` bomb in an index expression, a ``DEFAULT`` evaluated on
    ``ON CONFLICT REPLACE``) is deaf to the progress handler, and a schema need not look dangerous
    to be so.  A distractor that cannot be copied is left out (and logged); a gold table that cannot
    is an error.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(prefix=".reduce-", suffix=".sqlite", dir=target.parent)
    os.close(handle)
    gold = set(required)
    kept = {t.lower() for t in tables}
    plan_tables = []
    for table in tables:
        ddl = schema.ddl[table]
        if ddl is not None and any(parent.lower() not in kept for parent in schema.references[table]):
            ddl = strip_references(ddl, kept)
        plan_tables.append({"name": table, "ddl": ddl, "required": table in gold})
    plan: dict[str, Any] = {
        "source": os.path.abspath(source),  # the child runs in a folder of its own
        "immutable": immutable,
        "target": os.path.abspath(scratch),
        "time_limit_s": time_limit_s,
        "tables": plan_tables,
        "indexes": [{"table": t, "name": n, "sql": sql} for t, n, sql in schema.indexes if t.lower() in kept],
        "collations": schema.collations,
    }
    try:
        for message in _build_in_child(plan, time_limit_s, cancel, on_step):
            if "skipped" in message:
                left_out, reason = message["skipped"], message["reason"]
                _log.warning("%s: %s left out of %s: %s", source.name, left_out, target.name, reason)
        os.replace(scratch, target)
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)


def _build_in_child(
    plan: dict[str, Any],
    time_limit_s: float,
    cancel: threading.Event | None,
    on_step: Callable[[str], None] | None,
) -> list[dict[str, Any]]:
    """Run ``reduce_child`` on ``plan`` (``core.child``): killed past a step's limit plus the kit's
    grace, or at once on ``cancel``; its ``note`` messages (tables left out) come back."""
    from sqale_desktop.core import child

    notes: list[dict[str, Any]] = []
    steps: list[str] = []

    def heard(message: child.Message) -> None:
        if message.kind == "step":
            steps.append(str(message.data["step"]))
            if on_step is not None:
                on_step(steps[-1])
        elif message.kind == "note":
            notes.append(dict(message.data))

    try:
        child.run(
            CHILD_MODULE,
            plan,
            what="the reduced database's builder",
            cancel=cancel,
            on_message=heard,
            start_s=CHILD_START_S,
            step_s=time_limit_s,
        )
    except child.ChildStopped:
        raise ConditionError("building the reduced database was cancelled") from None
    except child.ChildTimedOut as exc:
        if "did not start" in str(exc):
            raise ConditionError(
                f"cannot build the reduced database: its process did not start within {CHILD_START_S:g} s"
            ) from None
        raise ConditionError(
            f"cannot build the reduced database: the {steps[-1] if steps else 'build'} ran past the "
            f"{time_limit_s:g} s time limit"
        ) from None
    except (child.ChildDied, child.ChildFailed) as exc:
        raise ConditionError(f"cannot build the reduced database: {exc}") from None
    return notes


def strip_references(ddl: str, kept: Iterable[str]) -> str:
    """``ddl`` without the foreign-key clauses that point to a table outside ``kept`` (lower-cased)."""
    from sqlglot.dialects.sqlite import SQLite
    from sqlglot.errors import SqlglotError
    from sqlglot.tokenizer_core import TokenType

    keep = set(kept)
    try:
        tokens = SQLite().tokenize(ddl)
    except SqlglotError:
        # SQLite accepted this statement, so a tokenizer that cannot read it is the odd one out:
        # keep the table whole (a dangling reference is harmless while foreign_keys is off)
        return ddl
    count = len(tokens)
    start = next((i for i, t in enumerate(tokens) if t.token_type == TokenType.L_PAREN), count)
    items: list[tuple[int, int]] = []  # token ranges [a, b) of the body's comma-separated items
    depth, first = 0, start + 1
    for i in range(start, count):
        kind = tokens[i].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                items.append((first, i))
                break
        elif kind == TokenType.COMMA and depth == 1:
            items.append((first, i))
            first = i + 1
    cuts: list[tuple[int, int]] = []  # character ranges [start, end)
    for a, b in items:
        if a >= b:
            continue
        head = [t.token_type for t in tokens[a : min(b, a + 3)]]
        is_table_fk = head[:1] == [TokenType.FOREIGN_KEY] or (
            head[:1] == [TokenType.CONSTRAINT] and head[2:3] == [TokenType.FOREIGN_KEY]
        )
        if is_table_fk:
            ref = next((j for j in range(a, b) if tokens[j].token_type == TokenType.REFERENCES), None)
            if ref is not None and ref + 1 < b and tokens[ref + 1].text.lower() not in keep:
                # the whole item goes, with the comma before it
                cuts.append((tokens[a - 1].start, tokens[b - 1].end + 1))
            continue
        j = a
        while j < b:
            if tokens[j].token_type == TokenType.REFERENCES and j + 1 < b:
                end = _reference_end(tokens, j, b)
                if tokens[j + 1].text.lower() not in keep:
                    begin = j - 2 if j - 2 >= a and tokens[j - 2].token_type == TokenType.CONSTRAINT else j
                    cuts.append((tokens[begin].start, tokens[end - 1].end + 1))
                j = end
            else:
                j += 1
    for begin, end in sorted(cuts, reverse=True):
        ddl = ddl[:begin] + ddl[end:]
    return ddl


def _reference_end(tokens: Sequence[Token], j: int, limit: int) -> int:
    """The index just past a column's ``REFERENCES t(cols) [ON ...] [MATCH x] [DEFERRABLE ...]`` clause."""
    from sqlglot.tokenizer_core import TokenType

    k = j + 2
    if k < limit and tokens[k].token_type == TokenType.L_PAREN:
        depth = 0
        while k < limit:
            if tokens[k].token_type == TokenType.L_PAREN:
                depth += 1
            elif tokens[k].token_type == TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    k += 1
                    break
            k += 1

    def word(i: int) -> str:
        return tokens[i].text.upper() if i < limit else ""

    while k < limit:
        w = word(k)
        if w == "ON":  # ON DELETE CASCADE | RESTRICT, ON UPDATE SET NULL | SET DEFAULT | NO ACTION
            k += 4 if word(k + 2) in ("SET", "NO") else 3
        elif w == "MATCH" or (w == "NOT" and word(k + 1) == "DEFERRABLE") or w == "INITIALLY":
            k += 2
        elif w == "DEFERRABLE":
            k += 1
        else:
            break
    return min(k, limit)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
