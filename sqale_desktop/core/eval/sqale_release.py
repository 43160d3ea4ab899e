"""The SQaLe release as a question set: Queries and Schemas parquet files joined on ``schema_id``.

Reading the files and materialising each database as SQLite is done by the official ``SQaLe``
library (PyPI ``SQaLe``, MIT; the ``eval`` extra): its DDL splitting, ``INSERT OR IGNORE`` of the
generated rows and int64/float clamping are what the paper's databases were built with, so they
are used rather than re-derived.  ``load_questions`` also replaces placeholder phrasings
(``...``, ``<string>``, a bare difficulty) with None; such questions are skipped and counted.

Sources: local parquet files (a file, or a folder whose files are told apart by their columns:
the Queries files have ``questions``, the Schemas files ``full_schema``), or hub dataset ids when
online, under the seeds' names (``trl-lab/SQaLe-2-text-to-SQL-Queries`` / ``-Schemas``) or the
library's (``trl-lab/sqale2_queries`` / ``sqale2_schemas``).  The databases are written once into
the app's cache folder, keyed by the Schemas source, never next to the source files.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqale_desktop.core.eval.question_types import EvalQuestion, QuestionSet, QuestionSetError

# Hub ids: Queries repository -> its Schemas repository.
HUB_PAIRS = {
    "trl-lab/SQaLe-2-text-to-SQL-Queries": "trl-lab/SQaLe-2-text-to-SQL-Schemas",
    "trl-lab/sqale2_queries": "trl-lab/sqale2_schemas",
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def is_hub_id(text: str) -> bool:
    """Whether ``text`` looks like a hub dataset id (``owner/name``) rather than a local path."""
    local = text.startswith((".", "/", "~")) or Path(text).suffix in (".json", ".jsonl", ".parquet")
    return bool(_HUB_ID.match(text)) and not local


def _library() -> Any:
    try:
        import sqale
    except ImportError:
        raise QuestionSetError(
            "reading the SQaLe release needs the SQaLe library: pip install 'sqale-desktop[eval]' "
            "(or pip install 'SQaLe>=0.2')"
        ) from None
    return sqale


def load(
    source: str,
    *,
    schemas: str | Path | None = None,
    phrasing: str = "evidence_supported",
    split: str = "test",
) -> QuestionSet:
    """The questions of ``source`` in ``phrasing``, with their databases materialised in the cache."""
    sqale = _library()
    if phrasing not in sqale.STYLES:
        raise QuestionSetError(f"unknown phrasing {phrasing!r}; the release has {', '.join(sqale.STYLES)}")
    query_files, schema_files = _sources(source, schemas, split)
    records: list[dict[str, Any]] = []
    try:
        for item in query_files:
            records.extend(sqale.load_questions(str(item), split=split, drop_placeholders=True))
    except (OSError, ValueError) as exc:
        raise QuestionSetError(f"cannot read the SQaLe questions {source}: {exc}") from None
    notes: list[str] = []
    usable = [r for r in records if (r.get("questions") or {}).get(phrasing)]
    placeholders = len(records) - len(usable)
    if placeholders:
        notes.append(f"{placeholders} questions skipped: their {phrasing} phrasing is a placeholder")
    paths, errors = materialise(schema_files, {str(r["schema_id"]) for r in usable}, split)
    questions = []
    missing = 0
    for record in usable:
        db_path = paths.get(str(record["schema_id"]))
        if db_path is None:
            missing += 1
            continue
        extra = {
            "schema_id": record["schema_id"],
            "difficulty": record.get("difficulty"),
            "relevant_tables": record.get("relevant_tables"),
        }
        questions.append(
            EvalQuestion(
                record["question_id"],
                str(record["schema_id"]),
                db_path,
                str(record["questions"][phrasing]),
                str(record["sql"]),
                extra,
            )
        )
    if missing:
        first = next(iter(errors.values()), "not in the Schemas files")
        notes.append(f"{missing} questions skipped: their database could not be built ({first})")
    return QuestionSet(str(source), "sqale", questions, phrasing=phrasing, notes=notes)


def materialise(
    schema_sources: list[str], schema_ids: Iterable[str], split: str
) -> tuple[dict[str, Path], dict[str, str]]:
    """SQLite files for ``schema_ids`` in the cache (built where missing): paths and build errors."""
    from sqale_desktop.core.paths import cache_dir

    sqale = _library()
    wanted = sorted(set(schema_ids))
    folder = cache_dir() / "eval" / "sqale" / _source_key(schema_sources, split)
    folder.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    errors: dict[str, str] = {}
    todo = []
    for schema_id in wanted:
        target = folder / f"{_safe(schema_id)}.db"
        if target.is_file():
            paths[schema_id] = target
        else:
            todo.append(schema_id)
    if not todo:
        return paths, errors
    # Built in a scratch folder and moved into place one by one, so an interrupted build never
    # leaves a half-written file that a later run would take for a finished one.
    scratch = Path(tempfile.mkdtemp(prefix="build-", dir=folder))
    try:
        remaining = set(todo)
        for item in schema_sources:
            if not remaining:
                break
            try:
                built = sqale.deserialize_sqale(
                    file_path=item, output_dir=str(scratch), split=split, schema_ids=sorted(remaining)
                )
            except (OSError, ValueError) as exc:
                raise QuestionSetError(f"cannot read the SQaLe schemas {item}: {exc}") from None
            for entry in built:
                schema_id = str(entry["schema_id"])
                if entry.get("error") or not entry.get("db_path"):
                    errors.setdefault(schema_id, str(entry.get("error")))
                    continue
                target = folder / f"{_safe(schema_id)}.db"
                os.replace(entry["db_path"], target)
                paths[schema_id] = target
                remaining.discard(schema_id)
                errors.pop(schema_id, None)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return paths, errors


def _sources(source: str, schemas: str | Path | None, split: str) -> tuple[list[str], list[str]]:
    """The Queries and Schemas sources (files, or hub ids) for ``source``."""
    path = Path(source).expanduser()
    if not path.exists():
        if not is_hub_id(source):
            raise QuestionSetError(f"{source}: no such file or folder")
        pair = HUB_PAIRS.get(source)
        schema_source = str(schemas) if schemas else pair
        if schema_source is None:
            raise QuestionSetError(f"{source}: give the Schemas dataset with --schemas")
        return [source], [schema_source]
    queries, found_schemas = _classify(path, split)
    if schemas is not None:
        schema_path = Path(schemas).expanduser()
        if schema_path.exists():
            found_schemas = _classify(schema_path, split)[1] if schema_path.is_dir() else [str(schema_path)]
        elif is_hub_id(str(schemas)):
            found_schemas = [str(schemas)]
        else:
            raise QuestionSetError(f"{schemas}: no such file or folder")
    elif not found_schemas and path.is_file():
        found_schemas = _classify(path.parent, split)[1]
    if not queries:
        raise QuestionSetError(f"{source}: no SQaLe Queries parquet file (one with a 'questions' column)")
    if not found_schemas:
        raise QuestionSetError(
            f"{source}: no SQaLe Schemas parquet file (one with a 'full_schema' column) next to it; "
            "give it with --schemas"
        )
    return queries, found_schemas


def _classify(path: Path, split: str) -> tuple[list[str], list[str]]:
    """Parquet files under ``path`` split into Queries and Schemas files by their columns."""
    import pyarrow.parquet as pq

    files = [path] if path.is_file() else sorted(path.rglob("*.parquet"))
    if path.is_dir():
        of_split = [f for f in files if split in f.name or split in f.parent.name]
        files = of_split or files
    queries: list[str] = []
    schemas: list[str] = []
    for item in files:
        try:
            names = set(pq.read_schema(item).names)
        except Exception as exc:  # pyarrow raises its own ArrowInvalid for a file that is not parquet
            raise QuestionSetError(f"{item} is not a readable parquet file: {exc}") from None
        if names & {"questions", "question id"}:
            queries.append(str(item))
        elif names & {"full_schema", "Full schema"}:
            schemas.append(str(item))
    return queries, schemas


def _source_key(sources: list[str], split: str) -> str:
    """A cache key that changes when a local Schemas file changes."""
    digest = hashlib.sha256(split.encode())
    for item in sources:
        digest.update(item.encode())
        path = Path(item)
        if path.is_file():
            info = path.stat()
            digest.update(f"{path.resolve()}|{info.st_size}|{info.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def _safe(schema_id: str) -> str:
    # the library's own file naming (deserialize.py: _write_database)
    return re.sub(r"[^\w\-]", "_", schema_id)
