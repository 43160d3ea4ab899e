"""``sqale-desktop query`` and ``tool`` start without the heavy libraries (issue 11).

Each runs in a fresh interpreter, which then prints the top-level modules it holds: a module-level
import anywhere on the CLI's path (a command module, a package ``__init__``) shows up here.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

# What the window, the converter, the engines and the evaluation need, and a query does not.
HEAVY = ("numpy", "gguf", "llama_cpp", "huggingface_hub", "sqlglot", "matplotlib", "pyarrow", "PySide6")

_PROBE = """\
import importlib, json, sys
from sqale_desktop.cli import main
for name in sys.argv[2:]:
    importlib.import_module(name)
status = main(json.loads(sys.argv[1]))
sys.stdout.flush()
print("\\nMODULES", json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
sys.exit(status)
"""


def _loaded_after(argv: list[str], home: Path, *preload: str) -> set[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "SQALE_DESKTOP_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), *preload],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    marker = done.stdout.rindex("MODULES ")
    return set(json.loads(done.stdout[marker + len("MODULES ") :]))


@pytest.fixture
def tiny_db(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (a INTEGER)")
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
    return path


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["query", "--db", "{db}", "SELECT a FROM t"], id="query"),
        pytest.param(["query", "--db", "{db}", "--format", "json", "SELECT a FROM t"], id="query-json"),
        pytest.param(["tool", "--db", "{db}", "list_tables"], id="tool"),
        pytest.param(["tool", "--db", "{db}", "describe_table", '{"table_name": "t"}'], id="tool-args"),
    ],
)
def test_query_and_tool_leave_heavy_libraries_unloaded(
    command: list[str], tiny_db: Path, tmp_path: Path
) -> None:
    argv = [part.replace("{db}", str(tiny_db)) for part in command]
    loaded = _loaded_after(argv, tmp_path / "home")
    assert "sqale_desktop" in loaded  # the probe really ran the CLI
    assert sorted(loaded.intersection(HEAVY)) == []


def test_the_probe_sees_a_heavy_import(tiny_db: Path, tmp_path: Path) -> None:
    """The check can fail: numpy imported beside the same command is reported as loaded."""
    loaded = _loaded_after(["tool", "--db", str(tiny_db), "list_tables"], tmp_path / "home", "numpy")
    assert "numpy" in loaded.intersection(HEAVY)


# The readers of data files (issue 24).  Since issue 30 every reader runs in the importer's child
# process (core.imports.isolated), so the command itself loads none of them, whatever the file:
# a crash or a flood in a reader can only end that child.
READERS = (
    *("duckdb", "python_calamine", "pyarrow", "charset_normalizer"),
    *("adbc_driver_sqlite", "adbc_driver_manager"),
)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        pytest.param("t.csv", "a\n1\n", id="csv"),
        pytest.param("t.jsonl", '{"a": 1}\n', id="jsonl"),
        pytest.param("t.csv", "a\nn\xe9\n", id="csv-not-utf8"),
        pytest.param("t.parquet", None, id="parquet"),
        pytest.param("t.csv", "a\n" + "12345678\n" * 600_000, id="csv-large"),
    ],
)
def test_a_data_file_is_read_in_the_importer_not_in_the_command(
    name: str, content: str | None, tmp_path: Path
) -> None:
    path = tmp_path / name
    if content is None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"a": [1]}), path)
    else:
        path.write_bytes(content.encode("latin-1"))
    loaded = _loaded_after(["query", "--db", str(path), "SELECT a FROM t"], tmp_path / "home")
    assert "sqale_desktop" in loaded
    assert sorted(loaded.intersection(READERS)) == []
    assert sorted(loaded.intersection(HEAVY)) == []
