"""``sqale-desktop tool`` and ``sqale-desktop query``: output, exit status, stderr."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sqale_desktop.cli import main
from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.tools import ToolBox
from tests.commands.subprocess_cli import run_cli
from tests.helpers import REPO_ROOT


def test_tool_prints_exactly_the_model_text_via_subprocess(chinook: Path) -> None:
    done = run_cli("tool", "--db", str(chinook), "join_path", '{"table_a": "Artist", "table_b": "Track"}')
    assert done.returncode == 0, done.stderr
    with open_readonly(chinook) as db:
        expected = ToolBox(db).join_path("Artist", "Track").text
    assert done.stdout == expected + "\n"
    assert done.stdout.startswith("Artist → Album → Track\n")


def test_tool_error_text_exits_1(chinook: Path) -> None:
    done = run_cli("tool", "--db", str(chinook), "describe_table", '{"table_name": "Artists"}')
    assert done.returncode == 1
    assert done.stdout == "Error: no such table: Artists. Did you mean: Artist?\n"


def test_tool_bad_usage_exits_2(chinook: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tool", "--db", str(chinook), "describe_table", "{not json"]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["tool", "--db", str(chinook), "describe_table", "[1, 2]"]) == 2
    with pytest.raises(SystemExit) as info:
        main(["tool", "--db", str(chinook), "drop_table"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["tool", "list_tables"])
    assert info.value.code == 2


def test_tool_on_a_bad_file_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.db"
    bad.write_text("nope")
    assert main(["tool", "--db", str(bad), "list_tables"]) == 1
    captured = capsys.readouterr()
    assert "bad.db is not a SQLite database" in captured.err
    assert "Traceback" not in captured.err


def test_tool_default_args_in_process(chinook: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tool", "--db", str(chinook), "list_tables"]) == 0
    assert capsys.readouterr().out.startswith("Album, Artist, Customer")


def test_query_table_format(chinook: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["query", "--db", str(chinook), "SELECT ArtistId, Name FROM Artist ORDER BY ArtistId LIMIT 2"])
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0].split(" | ") == ["ArtistId", "Name"]
    assert out[2].split(" | ")[1].strip() == "AC/DC"
    assert out[-1] == "(2 rows)"


def test_query_csv_and_json(chinook: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sql = "SELECT ArtistId, Name, NULL AS empty, 1.5 AS x FROM Artist ORDER BY ArtistId LIMIT 3"
    assert main(["query", "--db", str(chinook), sql, "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["ArtistId", "Name", "empty", "x"]
    assert rows[1] == ["1", "AC/DC", "", "1.5"]
    assert len(rows) == 4
    assert main(["query", "--db", str(chinook), sql, "--format", "json", "--max-rows", "2"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["columns"] == ["ArtistId", "Name", "empty", "x"]
    assert document["rows"][0] == [1, "AC/DC", None, 1.5]
    assert document["row_count"] == 2 and document["truncated"] is True
    assert "more rows exist" in captured.err


def test_query_blob_in_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    path = tmp_path / "blob.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE b (data BLOB)")
    conn.execute("INSERT INTO b VALUES (x'00010203')")
    conn.commit()
    conn.close()
    assert main(["query", "--db", str(path), "SELECT data FROM b", "--format", "json"]) == 0
    # issue 11: the export spelling (lossless), no longer the display form <blob 4 bytes>
    assert json.loads(capsys.readouterr().out)["rows"] == [["X'00010203'"]]


def test_query_denied_exits_nonzero_with_message_on_stderr(chinook: Path) -> None:
    done = run_cli("query", "--db", str(chinook), "DELETE FROM Artist")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip() == "sqale-desktop query: read-only: DELETE is not allowed"


def test_query_failing_and_timeout(chinook: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "--db", str(chinook), "SELECT nope FROM Artist"]) == 1
    assert "no such column: nope" in capsys.readouterr().err
    runaway = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    assert main(["query", "--db", str(chinook), runaway, "--timeout", "0.2"]) == 1
    assert "0.2 s time limit" in capsys.readouterr().err


def test_query_bad_options_exit_2(chinook: Path) -> None:
    for extra in (["--max-rows", "0"], ["--timeout", "-1"], ["--format", "xml"]):
        with pytest.raises(SystemExit) as info:
            main(["query", "--db", str(chinook), "SELECT 1", *extra])
        assert info.value.code == 2


def test_help_names_both_commands() -> None:
    done = run_cli("--help")
    assert done.returncode == 0
    assert "tool" in done.stdout and "query" in done.stdout


def test_query_json_has_no_bare_infinity(chinook: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["query", "--db", str(chinook), "SELECT 9e999 AS big, -9e999 AS small", "--format", "json"]) == 0
    )
    out = capsys.readouterr().out
    assert json.loads(out)["rows"] == [["inf", "-inf"]]
    assert "Infinity" not in out


def test_output_cut_short_by_the_reader_is_not_a_traceback(chinook: Path) -> None:
    done = subprocess.run(
        f"'{sys.executable}' -m sqale_desktop query --db '{chinook}' 'SELECT * FROM Track' | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
    )
    assert done.stdout.startswith("TrackId")
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
