"""Spider's real databases and gold queries: the guard never blocks a legitimate read, results are
those of plain SQLite, and every tool answers on every database."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from sqale_desktop.core.db import ReadOnlyDatabase, open_readonly
from sqale_desktop.core.tools import ToolBox
from tests.helpers import shared_data


def test_every_gold_query_runs_through_the_guard_with_plain_sqlite_results() -> None:
    questions_file = shared_data("text2sql/spider/questions.json")
    questions = json.loads(questions_file.read_text(encoding="utf-8"))
    assert len(questions) > 900
    opened: dict[Path, tuple[ReadOnlyDatabase, sqlite3.Connection]] = {}
    try:
        for question in questions:
            path = questions_file.parent / question["db_path"]
            if path not in opened:
                plain = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
                plain.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
                opened[path] = (open_readonly(path), plain)
            db, plain = opened[path]
            ours = db.execute(question["gold_sql"], max_rows=1_000_000)
            theirs = plain.execute(question["gold_sql"]).fetchall()
            assert ours.rows == theirs, question["id"]
            assert not ours.truncated
    finally:
        for db, plain in opened.values():
            db.close()
            plain.close()


@pytest.mark.slow
def test_every_tool_answers_on_every_spider_database() -> None:
    folder = shared_data("text2sql/spider/database")
    paths = sorted(folder.glob("*/*.sqlite"))
    assert len(paths) > 150
    failures: list[tuple[str, str]] = []
    for path in paths:
        with open_readonly(path) as db:
            box = ToolBox(db)
            names = [t.name for t in box.schema.visible()]
            outputs = [box.list_tables(), box.foreign_keys(), box.join_path(names[0], names[-1])]
            outputs += [box.describe_table(name) for name in names]
            outputs += [box.sample_rows(name, 2) for name in names]
            failures += [(path.name, out.text) for out in outputs if not out.ok]
    assert failures == []
