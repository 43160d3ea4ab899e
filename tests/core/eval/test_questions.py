"""Question-set readers: the plain list, Spider, BIRD and the SQaLe release's parquet pair."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from sqale_desktop.core.eval.questions import QuestionSetError, detect_format, load_question_set
from sqale_desktop.core.eval.scorer import Scorer
from tests.helpers import shared_data


def _sqlite(path: Path, script: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(script)
    conn.commit()
    conn.close()
    return path


def test_plain_spider_list_reads_972_questions_with_their_databases() -> None:
    path = shared_data("text2sql/spider/questions.json")
    qset = load_question_set(path)
    assert qset.format == "plain" and len(qset.questions) == 972 and qset.notes == []
    first = qset.questions[0]
    assert (first.id, first.db_id, first.key) == (0, "concert_singer", "0")
    assert first.db_path == (path.parent / "database/concert_singer/concert_singer.sqlite").resolve()
    assert first.gold_sql == "SELECT count(*) FROM singer"


def test_spider_dev_json_skips_and_counts_questions_without_a_database() -> None:
    path = shared_data("text2sql/spider/dev.json")
    assert detect_format(path) == "spider"
    qset = load_question_set(path)
    assert qset.format == "spider"
    assert len(qset.questions) == 972  # the databases of the other 62 questions are not shipped here
    assert qset.notes and qset.notes[0].startswith("62 questions skipped")
    assert qset.questions[0].gold_sql == "SELECT count(*) FROM singer"


def test_bird_dev_json_appends_the_evidence(tmp_path: Path) -> None:
    _sqlite(
        tmp_path / "dev_databases/school/school.sqlite",
        "CREATE TABLE s (n TEXT); INSERT INTO s VALUES ('a');",
    )
    records = [
        {
            "question_id": 7,
            "db_id": "school",
            "question": "How many schools?",
            "evidence": "school = row",
            "SQL": "SELECT count(*) FROM s",
            "difficulty": "simple",
        },
        {"question_id": 8, "db_id": "school", "question": "Names?", "evidence": "", "SQL": "SELECT n FROM s"},
    ]
    (tmp_path / "dev.json").write_text(json.dumps(records), encoding="utf-8")
    qset = load_question_set(tmp_path)
    assert qset.format == "bird" and qset.phrasing == "evidence_supported"
    assert [q.question for q in qset.questions] == ["How many schools?, evidence: school = row", "Names?"]
    assert [q.id for q in qset.questions] == [7, 8]
    assert qset.questions[0].extra == {"difficulty": "simple"}
    assert Scorer("bird").score(qset.questions[0].db_path, qset.questions[0].gold_sql, "SELECT 1").correct


def test_plain_jsonl_with_relative_paths(tmp_path: Path) -> None:
    _sqlite(tmp_path / "dbs/a.sqlite", "CREATE TABLE t (x);")
    line = {
        "id": "q1",
        "db_id": "a",
        "db_path": "dbs/a.sqlite",
        "question": "?",
        "gold_sql": "SELECT x FROM t",
    }
    (tmp_path / "set.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    qset = load_question_set(tmp_path / "set.jsonl")
    assert qset.format == "plain" and qset.questions[0].db_path == (tmp_path / "dbs/a.sqlite").resolve()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"id": 1}]', "cannot tell the format"),
        ("{not json", "not valid JSON"),
        ("[]", "holds no questions"),
    ],
)
def test_unreadable_sets_raise_question_set_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "q.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(QuestionSetError, match=message):
        load_question_set(path)


# -- the SQaLe release ------------------------------------------------------------------------

STYLES = (
    "verbose",
    "evidence_supported",
    "structured",
    "requirements_list",
    "short_ambiguous",
    "short_high_level",
    "casual",
    "spelling_grammar_mistakes",
)


def _phrasings(base: str, **overrides: str) -> dict[str, str]:
    return {style: overrides.get(style, f"{base} ({style})") for style in STYLES}


def write_sqale_pair(folder: Path) -> tuple[Path, Path]:
    """A Queries and a Schemas parquet file in the release's columns (see ../shared/seeds/002*)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    queries = pa.table(
        {
            "question_id": ["q1", "q2", "q3"],
            "schema_id": ["s1", "s1", "s2"],
            "sql": [
                "SELECT name FROM employee WHERE dept_id = 1",
                "SELECT count(*) FROM employee",
                "SELECT big FROM numbers",
            ],
            "difficulty": ["simple", "moderate", "hard"],
            "questions": [
                _phrasings(
                    "Who works in sales?", evidence_supported="Who is in sales?, evidence: dept 1 is sales"
                ),
                _phrasings("How many employees?", evidence_supported="..."),  # a placeholder
                _phrasings("Which big number?"),
            ],
            "relevant_tables": ['["employee", "dept"]', '["employee"]', '["numbers"]'],
            "number_of_relevant_tables": [2, 1, 1],
            "execution_result": ['[["Ann"]]', "[[2]]", "[[9223372036854775807]]"],
        }
    )
    ddl_1 = (
        "CREATE TABLE dept (id INTEGER PRIMARY KEY, name TEXT);\n"
        "CREATE TABLE employee (id INTEGER PRIMARY KEY, name TEXT, dept_id INTEGER REFERENCES dept(id));"
    )
    content_1 = {
        "dept": [{"id": 1, "name": "sales"}, {"id": 2, "name": "ops"}],
        "employee": [
            {"id": 1, "name": "Ann", "dept_id": 1},
            {"id": 2, "name": "Bob", "dept_id": 2},
            {"id": 2, "name": "Dup", "dept_id": 2},  # violates the key: INSERT OR IGNORE drops it
        ],
    }
    ddl_2 = "CREATE TABLE numbers (big INTEGER);"
    content_2 = {"numbers": [{"big": 2**70}]}  # clamped to int64 by the library
    schemas = pa.table(
        {
            "schema_id": ["s1", "s2"],
            "full_schema": [ddl_1, ddl_2],
            "schema_content": [json.dumps(content_1), json.dumps(content_2)],
            "number_of_tables": [2, 1],
        }
    )
    q_path, s_path = folder / "queries-test.parquet", folder / "schemas-test.parquet"
    pq.write_table(queries, q_path)
    pq.write_table(schemas, s_path)
    return q_path, s_path


def test_sqale_parquet_pair_materialises_databases_in_the_cache(tmp_path: Path, isolated_home: Path) -> None:
    q_path, s_path = write_sqale_pair(tmp_path / "release")
    assert detect_format(q_path) == "sqale"
    qset = load_question_set(q_path)  # the Schemas file is found next to it
    assert qset.format == "sqale" and qset.phrasing == "evidence_supported"
    assert [q.id for q in qset.questions] == ["q1", "q3"]
    assert qset.notes == ["1 questions skipped: their evidence_supported phrasing is a placeholder"]
    first = qset.questions[0]
    assert first.question == "Who is in sales?, evidence: dept 1 is sales"
    assert first.db_id == "s1" and first.extra["difficulty"] == "simple"
    assert first.db_path.is_relative_to(isolated_home) and first.db_path.is_file()
    assert sorted(p.name for p in (tmp_path / "release").iterdir()) == [
        "queries-test.parquet",
        "schemas-test.parquet",
    ]
    conn = sqlite3.connect(first.db_path)
    assert conn.execute("SELECT name FROM employee ORDER BY id").fetchall() == [("Ann",), ("Bob",)]
    conn.close()
    scorer = Scorer()
    assert scorer.score(first.db_path, first.gold_sql, "SELECT 'Ann'").correct
    third = qset.questions[1]
    assert scorer.execute(third.db_path, third.gold_sql).rows == [(2**63 - 1,)]

    # a second load reuses the cached files; another phrasing keeps the placeholder-free question
    again = load_question_set(tmp_path / "release", phrasing="verbose", schemas=s_path)
    assert [q.id for q in again.questions] == ["q1", "q2", "q3"]
    assert again.questions[0].db_path == first.db_path
    assert again.questions[1].question == "How many employees? (verbose)"


def test_sqale_unknown_phrasing_and_missing_schemas(tmp_path: Path) -> None:
    q_path, s_path = write_sqale_pair(tmp_path / "release")
    with pytest.raises(QuestionSetError, match="unknown phrasing"):
        load_question_set(q_path, phrasing="shouting")
    s_path.unlink()
    with pytest.raises(QuestionSetError, match="no SQaLe Schemas parquet"):
        load_question_set(q_path)


def test_eval_run_over_the_sqale_release_with_gold_tables_only(tmp_path: Path) -> None:
    from sqale_desktop import cli
    from sqale_desktop.core.eval.records import read_episodes

    write_sqale_pair(tmp_path / "release")
    run_dir = tmp_path / "run"
    argv = [
        "eval",
        "run",
        str(tmp_path / "release"),
        "--replay",
        "gold",
        "--condition",
        "gold",
        "--out",
        str(run_dir),
    ]
    assert cli.main(argv) == 0
    episodes = read_episodes(run_dir)
    assert sorted(r["id"] for r in episodes) == ["q1", "q3"] and all(r["correct"] for r in episodes)
    assert next(r for r in episodes if r["id"] == "q1")["gold_tables"] == ["employee"]
    settings = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["settings"]
    assert settings["format"] == "sqale" and settings["phrasing"] == "evidence_supported"
    assert settings["notes"] == ["1 questions skipped: their evidence_supported phrasing is a placeholder"]
