"""``benchmarks/import.py --quick`` runs end to end and ends with its one JSON object.

Behaviour, never a time: every figure's key is there, the row counts are the rows the benchmark
generated, and the CSV's second open reused the import (the benchmark asserts that itself).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO_ROOT

KINDS = ("csv", "csv_cp1252", "xlsx", "parquet")
FIGURES = ("bytes", "rows", "import_s", "mb_per_s", "mb_per_cpu_s", "rows_per_s", "first_rows_s", "fast_path")


def test_quick_run_ends_with_the_figures_as_json(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / "import.py"), "--quick"],
        cwd=REPO_ROOT,
        env={**os.environ, "SQALE_DESKTOP_HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["quick"] is True
    for kind in KINDS:
        for figure in FIGURES:
            assert f"{kind}_{figure}" in figures, f"{kind}_{figure}"
    assert figures["xlsx_rows"] == 10_000
    assert figures["parquet_rows"] == 100_000
    assert figures["csv_rows"] > 0 and figures["csv_bytes"] >= 32 * 1024 * 1024
    assert "csv_preview_s" in figures and "csv_reuse_s" in figures
    # which path each file took (the page size of the file it made)
    assert [figures[f"{kind}_fast_path"] for kind in KINDS] == [True, True, False, True]
