"""A JSON array is read element by element, and gives exactly what ``json.loads`` gives.

The buffer is made a few characters long here, so that every element, number and string is cut
at a buffer's end somewhere: the hardest case for a streaming reader.
"""

from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core.imports import ImportFailed, ImportLimits, import_source, json_source

DOCUMENTS = [
    "[]",
    " [ ] ",
    '[{"a": 1}]',
    '[{"a": 12345678901234567890123}, {"a": -0.5e-3}, {"b": "x, ] y"}]',
    '[1, 22, 333, 4444, 55555, true, false, null, "s", [1, [2]], {"k": {"n": [1, 2]}}]',
    '\n[\n  {"text": "a \\"quoted\\" ]}, string", "n": 1.0},\n  {"text": "\\u00e9\\ud83d\\ude00"}\n]\n',
    '[{"dup": 1, "dup": 2}, {"nan": NaN, "inf": -Infinity}]',
]


def read(document: str, chunk: int) -> list[Any]:
    return list(json_source._elements(Path("doc.json"), io.StringIO(document), chunk))


def same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN (``json.loads`` gives NaN for ``NaN``)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b) and type(a) is type(b)


@pytest.mark.parametrize("document", DOCUMENTS)
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_elements_are_what_json_loads_gives(document: str, chunk: int) -> None:
    assert same(read(document, chunk), json.loads(document))


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ("[1, 2", "not valid JSON"),
        ("[1 2]", "expected ',' or ']'"),
        ("[1, 2] 3", "extra data after the array"),
        ('[{"a": }]', "not valid JSON"),
        ("[1,]", "not valid JSON"),
        ("", "expected '['"),
    ],
)
def test_broken_arrays_say_where(document: str, says: str) -> None:
    with pytest.raises(ImportFailed, match=re.escape(says)):
        read(document, 3)
    with pytest.raises(ValueError):
        json.loads(document)  # the standard library refuses each as well


def test_a_large_array_imports_with_progress_and_bounded_reads(tmp_path: Path) -> None:
    """Rows arrive while the file is being read: the progress reports grow with the bytes read."""
    rows = [{"id": i, "name": f"n{i}", "score": i / 8, "tags": [i % 3]} for i in range(60_000)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    seen: list[int] = []
    limits = ImportLimits(json_chunk_chars=64 * 1024)
    result = import_source(path, progress=lambda report: seen.append(report.bytes_done), limits=limits)
    import sqlite3

    conn = sqlite3.connect(f"file:{result.db_path}?mode=ro", uri=True)
    try:
        got = conn.execute("SELECT count(*), sum(id), max(score), typeof(max(score)), max(tags) FROM big")
        assert got.fetchone() == (60_000, sum(range(60_000)), 59_999 / 8, "real", "[2]")
    finally:
        conn.close()
    assert len(set(seen)) >= 2 and 0 < min(seen) < path.stat().st_size  # reported while reading
