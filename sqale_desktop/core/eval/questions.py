"""Question sets: the project's plain list, Spider, BIRD and the SQaLe release, read into one shape.

* ``plain``: ``questions.json`` (a JSON list) or ``.jsonl`` of ``{id, db_id, db_path, question,
  gold_sql}``, ``db_path`` relative to the file (``../shared/data/text2sql/*/questions.json``).
* ``spider``: Spider's ``dev.json`` (``db_id``, ``question``, ``query``) next to a ``database/``
  folder holding ``<db_id>/<db_id>.sqlite``; ids are positions in the file.
* ``bird``: BIRD's ``dev.json`` (``question_id``, ``db_id``, ``question``, ``evidence``, ``SQL``)
  next to ``dev_databases/<db_id>/<db_id>.sqlite``.  The evidence is appended the way SQaLe's
  ``evidence_supported`` phrasing does it, ``<question>, evidence: <evidence>``, and the set
  records that choice in ``phrasing``.
* ``sqale``: the SQaLe release's Queries and Schemas parquet files (see :mod:`.sqale_release`).
* ``sparc``: a conversational set (SParC / CoSQL layout) is recognised here but read by
  :mod:`.conversations`: its utterances are asked in order, not one by one.

A question whose database file is missing is skipped and counted in ``notes``: a question set
copied without all of its databases (as ``../shared/data`` holds 972 of Spider's 1,034 dev
questions) is still usable, and the skipped count says how much of it was measured.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sqale_desktop.core import json_input
from sqale_desktop.core.eval.question_types import EvalQuestion as EvalQuestion
from sqale_desktop.core.eval.question_types import Format as Format
from sqale_desktop.core.eval.question_types import QuestionSet as QuestionSet
from sqale_desktop.core.eval.question_types import QuestionSetError as QuestionSetError
from sqale_desktop.core.eval.question_types import database_file
from sqale_desktop.core.json_input import JsonInputError

FORMATS: tuple[Format, ...] = ("plain", "spider", "bird", "sqale", "sparc")
BIRD_PHRASING = "evidence_supported"


def detect_format(path: Path) -> Format:
    """Guess the format from the file (or folder) ``path``."""
    if path.is_dir():
        for name in ("questions.json", "questions.jsonl", "dev.json"):
            if (path / name).is_file():
                return detect_format(path / name)
        if any(path.rglob("*.parquet")):
            return "sqale"
        raise QuestionSetError(f"{path}: no questions.json, dev.json or parquet files in this folder")
    if path.suffix == ".parquet":
        return "sqale"
    first = _first_record(path)
    if "interaction" in first and ("database_id" in first or "db_id" in first):
        return "sparc"
    if "gold_sql" in first and "db_path" in first:
        return "plain"
    if "SQL" in first and "db_id" in first:
        return "bird"
    if "query" in first and "db_id" in first:
        return "spider"
    raise QuestionSetError(
        f"{path}: cannot tell the format (expected gold_sql/db_path, Spider's query/db_id "
        "or BIRD's SQL/db_id)"
    )


def load_question_set(
    source: str | Path,
    fmt: Format | None = None,
    *,
    phrasing: str = BIRD_PHRASING,
    schemas: str | Path | None = None,
    split: str = "test",
) -> QuestionSet:
    """Read a question set; ``phrasing``, ``schemas`` and ``split`` apply to the SQaLe release."""
    from sqale_desktop.core.eval import sqale_release

    text = str(source)
    path = Path(text).expanduser()
    if not path.exists():
        if fmt in (None, "sqale") and sqale_release.is_hub_id(text):
            return sqale_release.load(text, schemas=schemas, phrasing=phrasing, split=split)
        raise QuestionSetError(f"{text}: no such file or folder")
    fmt = fmt or detect_format(path)
    if fmt == "sqale":
        return sqale_release.load(text, schemas=schemas, phrasing=phrasing, split=split)
    path = question_file(path)
    if fmt == "sparc":
        raise QuestionSetError(
            f"{path} is a conversational set (SParC/CoSQL layout): 'eval run' asks its "
            "interactions turn by turn; it has no single questions to score"
        )
    records = _records(path)
    if fmt == "plain":
        return _plain(path, records)
    if fmt == "spider":
        return _spider(path, records)
    return _bird(path, records)


def question_file(path: Path) -> Path:
    """The file of a set given as a folder (its questions.json, questions.jsonl or dev.json)."""
    if not path.is_dir():
        return path
    candidates = [path / "questions.json", path / "questions.jsonl", path / "dev.json"]
    return next((c for c in candidates if c.is_file()), path / "dev.json")


def _imported(db_path: Path) -> Path:
    """A ``db_path`` naming a CSV, Excel, Parquet… file or a folder: its imported SQLite file
    (made once, reused while the source is unchanged)."""
    from sqale_desktop.core.imports import kind_of, resolve_database

    if not db_path.exists() or kind_of(db_path) is None:
        return db_path
    return resolve_database(db_path, ctrl_c_stops=True)[0]


def _plain(path: Path, records: Sequence[dict[str, Any]]) -> QuestionSet:
    questions = []
    for index, rec in enumerate(records):
        _require(rec, ("id", "db_path", "question", "gold_sql"), path, index)
        db_path = (path.parent / str(rec["db_path"])).resolve()
        db_id = str(rec.get("db_id") or db_path.stem)
        db_path = _imported(db_path)
        extra = {k: v for k, v in rec.items() if k not in ("id", "db_id", "db_path", "question", "gold_sql")}
        questions.append(
            EvalQuestion(rec["id"], db_id, db_path, str(rec["question"]), str(rec["gold_sql"]), extra)
        )
    return _finish(QuestionSet(str(path), "plain", questions))


def _spider(path: Path, records: Sequence[dict[str, Any]]) -> QuestionSet:
    questions = [
        EvalQuestion(index, db_id, db_path, str(rec["question"]), str(rec["query"]))
        for index, rec, db_id, db_path in _by_db_id(path, records, "database", "query")
    ]
    return _finish(QuestionSet(str(path), "spider", questions))


def _bird(path: Path, records: Sequence[dict[str, Any]]) -> QuestionSet:
    questions = []
    for index, rec, db_id, db_path in _by_db_id(path, records, "dev_databases", "SQL"):
        evidence = str(rec.get("evidence") or "").strip()
        text = str(rec["question"])
        if evidence:
            text = f"{text}, evidence: {evidence}"
        extra = {"difficulty": rec["difficulty"]} if "difficulty" in rec else {}
        qid = rec.get("question_id", index)
        questions.append(EvalQuestion(qid, db_id, db_path, text, str(rec["SQL"]), extra))
    return _finish(QuestionSet(str(path), "bird", questions, phrasing=BIRD_PHRASING))


def _by_db_id(
    path: Path, records: Sequence[dict[str, Any]], folder: str, sql_key: str
) -> Iterator[tuple[int, dict[str, Any], str, Path]]:
    """Spider's layout, BIRD's too: each record names its database by ``db_id``, whose file lies in
    the ``folder`` beside ``path``; yields each record's position, the record (checked for the
    database, the question and ``sql_key``), its ``db_id`` and its database's path."""
    root = path.parent / folder
    for index, rec in enumerate(records):
        _require(rec, ("db_id", "question", sql_key), path, index)
        db_id = str(rec["db_id"])
        yield index, rec, db_id, database_file(root, db_id)


def _finish(qset: QuestionSet) -> QuestionSet:
    _refuse_duplicates(qset)
    kept = [q for q in qset.questions if q.db_path.is_file()]
    missing = len(qset.questions) - len(kept)
    if missing:
        dbs = len({q.db_id for q in qset.questions if not q.db_path.is_file()})
        qset.notes.append(f"{missing} questions skipped: their database file is missing ({dbs} databases)")
    qset.questions = kept
    return qset


def _refuse_duplicates(qset: QuestionSet) -> None:
    """Two questions with one key (``1``, ``1`` or ``1``, ``"1"``) would both run, but predictions,
    resumed runs and reports match questions by key and would count one: refuse the set instead."""
    first: dict[str, int] = {}
    for index, question in enumerate(qset.questions):
        earlier = first.setdefault(question.key, index)
        if earlier != index:
            raise QuestionSetError(
                f"{qset.source}: entries {earlier} and {index} share the id {question.key} "
                '(ids are matched as text, so 1 and "1" are the same id)'
            )


def _require(rec: Any, keys: Sequence[str], path: Path, index: int) -> None:
    if not isinstance(rec, dict):
        raise QuestionSetError(f"{path}: entry {index} is not a JSON object")
    missing = [k for k in keys if k not in rec]
    if missing:
        raise QuestionSetError(f"{path}: entry {index} lacks {', '.join(missing)}")


def _records(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise QuestionSetError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise QuestionSetError(f"{path} is not UTF-8 text: {exc}") from None
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            data = json_input.loads(text)
        else:
            data = [json_input.loads(line) for line in text.splitlines() if line.strip()]
    except JsonInputError as exc:
        raise QuestionSetError(f"{path} is not usable JSON or JSON Lines: {exc}") from None
    if not isinstance(data, list):
        raise QuestionSetError(f"{path}: expected a JSON list of questions")
    return data


def _first_record(path: Path) -> dict[str, Any]:
    records = _records(path)
    if not records or not isinstance(records[0], dict):
        raise QuestionSetError(f"{path} holds no questions")
    return records[0]
