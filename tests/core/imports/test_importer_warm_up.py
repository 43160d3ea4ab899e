"""What the importers' server takes while idle (``isolated.WARM``) is what the children it forks
need: after those steps, importing each kind of file imports no further module (a module imported
in a forked child is imported again in every child, while a person waits), and pandas, which
pyarrow would import at its first conversion of a Python value, is never imported at all.

The steps run in a fresh interpreter of their own, as in the server; the imports there run in
that process (``IN_CHILD`` off), which is what a forked child does after its fork."""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import shared_data

SCRIPT = r"""
import json, os, sys, tempfile
from pathlib import Path
os.environ["SQALE_DESKTOP_HOME"] = tempfile.mkdtemp()
from sqale_desktop.core.child import forks
from sqale_desktop.core.imports import import_source, isolated
isolated._hide_pandas()
for step in isolated.WARM:
    forks.warm_up(step)
isolated.IN_CHILD = False
first, *rest = [Path(p) for p in sys.argv[1:]]
import_source(first)  # the parent's side of an import (the settings, the cache's lock)
out = {}
for path in rest:
    before = set(sys.modules)
    import_source(path)
    out[path.name] = sorted(set(sys.modules) - before)
print(json.dumps({"imported": out, "pandas": "pandas" in sys.modules}))
"""


def _files(folder: Path) -> list[Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        f"{i},name {i},2024-01-{i % 28 + 1:02d},{i * 0.5},{'true' if i % 2 else 'false'}" for i in range(3000)
    ]
    text = "id,name,day,amount,flag\n" + "\n".join(rows) + "\n"
    utf8 = folder / "plain.csv"
    utf8.write_text(text, encoding="utf-8")
    latin = folder / "export.csv"  # a spreadsheet's export: cp1252, accents throughout
    latin.write_text(text.replace("name", "caf\u00e9 cr\u00e8me"), encoding="cp1252")
    packed = folder / "packed.csv.gz"
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    parquet = folder / "typed.parquet"
    pq.write_table(
        pa.table({
            "id": pa.array(range(3000), pa.int64()),
            "at": pa.array([i * 1_000_000 for i in range(3000)], pa.timestamp("us")),
            "zoned": pa.array([i * 1_000_000 for i in range(3000)], pa.timestamp("us", tz="Europe/Paris")),
            "name": pa.array([f"n{i}" for i in range(3000)]),
        }),
        parquet,
    )  # fmt: skip
    files = shared_data("files")
    return [
        files / "json" / "vega__penguins.json",  # first: the parent's side
        utf8,
        latin,
        packed,
        parquet,
        files / "tsv" / "vega__unemployment.tsv",
        files / "json" / "gsm8k__test.jsonl",
        files / "excel" / "calamine__any_sheets.xlsx",
        files / "excel" / "calamine__any_sheets.ods",
        files / "duckdb" / "jaffle_shop.duckdb",
    ]


@pytest.fixture(scope="module")
def after_warm_up(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    files = _files(tmp_path_factory.mktemp("warm"))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_child_forked_after_the_warm_up_imports_no_module_for_any_kind_of_file(
    after_warm_up: dict[str, Any],
) -> None:
    imported = after_warm_up["imported"]
    assert len(imported) == 9
    # The encoding detector's candidates depend on the bytes (a few kilobytes each, at most).
    assert {name: [m for m in mods if not m.startswith("encodings.")] for name, mods in imported.items()} == {
        name: [] for name in imported
    }


def test_the_importer_never_imports_pandas(after_warm_up: dict[str, Any]) -> None:
    if importlib.util.find_spec("pandas") is None:
        pytest.skip("pandas is not installed here: nothing to hide")  # the project's test extras have it
    assert after_warm_up["pandas"] is False
