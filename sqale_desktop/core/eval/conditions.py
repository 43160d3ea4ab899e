"""Schema-size conditions (the paper's Figure 8): gold tables only, plus K distractors, or the full schema.

A reduced database is a new SQLite file in the app's cache, never next to the source, which is
only ever opened read-only (attached ``mode=ro``, or ``immutable=1`` where the core's opening
rules say so).  It holds the chosen tables with every row (copied by SQLite itself, so values keep
their exact types and bytes), their indexes, and the foreign keys whose both ends remain: a
reference to a table that was left out is cut from the ``CREATE TABLE`` text, found with sqlglot's
SQLite tokenizer, so every other byte of the original statement is kept (regenerating the DDL from
a parse tree would turn ``INTEGER PRIMARY KEY`` into ``INT PRIMARY KEY`` and lose the rowid alias).
Views and triggers are left out: they may name tables that are not there.

Distractors are chosen as the model card describes the training sampler: grown from the gold
tables along foreign keys (breadth first, each ring in random order) until K are added, then filled
at random from the rest; the tables are then shuffled, so the order ``list_tables`` shows gives
nothing away.  Choices are seeded per question, so a resumed run builds the same database.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.eval import sql_facts

if TYPE_CHECKING:
    from sqlglot.tokenizer_core import Token

DEFAULT_DISTRACTORS = 32
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
    """The tables of a source database in file order and its foreign-key graph (lower-cased names)."""

    tables: list[str]
    ddl: dict[str, str]
    neighbours: dict[str, set[str]]
    references: dict[str, set[str]]  # table -> the tables its foreign keys point to


def read_schema(conn: sqlite3.Connection) -> SourceSchema:
    rows = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND sql IS NOT NULL ORDER BY rowid"
    ).fetchall()
    tables = [str(name) for name, _ in rows]
    ddl = {str(name): str(sql) for name, sql in rows}
    by_lower = {t.lower(): t for t in tables}
    neighbours: dict[str, set[str]] = {t: set() for t in tables}
    references: dict[str, set[str]] = {t: set() for t in tables}
    for table in tables:
        for fk in conn.execute("SELECT * FROM pragma_foreign_key_list(?)", (table,)).fetchall():
            parent = by_lower.get(str(fk[2]).lower())
            if parent is None:
                continue
            references[table].add(parent)
            if parent != table:
                neighbours[table].add(parent)
                neighbours[parent].add(table)
    return SourceSchema(tables, ddl, neighbours, references)


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
) -> tuple[Path, list[str]]:
    """The database an episode runs on under ``condition``, and the gold tables found in it.

    ``full`` is the source itself (opened read-only by the episode); the others are reduced
    copies under ``cache``, built once and reused (the file name is a digest of the source's
    identity and the chosen tables in order).
    """
    from sqale_desktop.core.db import DatabaseError, open_readonly
    from sqale_desktop.core.db.opening import sqlite_uri

    try:
        probe = open_readonly(source)
    except DatabaseError as exc:
        raise ConditionError(str(exc)) from None
    immutable = probe.immutable
    probe.close()
    uri = sqlite_uri(source, immutable=immutable)
    conn = sqlite3.connect(uri, uri=True)
    try:
        conn.execute("PRAGMA query_only = 1")
        schema = read_schema(conn)
    finally:
        conn.close()
    gold = gold_tables(gold_sql, schema)
    if condition.kind == "full":
        return source, gold
    tables = choose_tables(schema, gold, condition, question_rng(seed, question_key))
    info = source.stat()
    identity = f"{source.resolve()}|{info.st_size}|{info.st_mtime_ns}|" + "\x00".join(tables)
    target = cache / f"{source.stem}-{hashlib.sha256(identity.encode()).hexdigest()[:20]}.sqlite"
    if not target.is_file():
        build_reduced(uri, schema, tables, target)
    return target, gold


def build_reduced(source_uri: str, schema: SourceSchema, tables: Sequence[str], target: Path) -> None:
    """Write ``tables`` (in this order) of the source into a new file ``target``, atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(prefix=".reduce-", suffix=".sqlite", dir=target.parent)
    os.close(handle)
    kept = {t.lower() for t in tables}
    try:
        # a URI connection, so that ATTACH reads the source's URI (mode=ro / immutable=1) as one
        out = sqlite3.connect(Path(scratch).as_uri(), uri=True, isolation_level=None)
        try:
            out.execute("PRAGMA journal_mode = OFF")
            out.execute("PRAGMA synchronous = OFF")
            out.execute("ATTACH DATABASE ? AS src", (source_uri,))
            out.execute("BEGIN")
            for table in tables:
                ddl = schema.ddl[table]
                if any(parent.lower() not in kept for parent in schema.references[table]):
                    ddl = strip_references(ddl, kept)
                out.execute(ddl)
                columns = [
                    str(row[1])
                    for row in out.execute("SELECT * FROM pragma_table_xinfo(?, 'src')", (table,))
                    if row[6] in (0, 1)  # not a generated column
                ]
                names = ", ".join(_quote(c) for c in columns)
                out.execute(
                    f"INSERT INTO main.{_quote(table)} ({names}) SELECT {names} FROM src.{_quote(table)}"
                )
            indexes = out.execute(
                "SELECT tbl_name, sql FROM src.sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
            ).fetchall()
            for table_name, sql in indexes:
                if str(table_name).lower() in kept:
                    out.execute(sql)
            out.execute("COMMIT")
            out.execute("DETACH DATABASE src")
        finally:
            out.close()
        os.replace(scratch, target)
    except sqlite3.Error as exc:
        raise ConditionError(f"cannot build the reduced database {target.name}: {exc}") from None
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)


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
