"""``apply_metadata`` writes exactly the pairs ``metadata`` lists, with the types llama.cpp reads
(read back from a written file: the one list, the one type rule)."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

from sqale_desktop.core.engines.qwen35_layout import ARCH, QWEN35_2B, apply_metadata, metadata


def test_apply_metadata_writes_what_metadata_lists(tmp_path: Path) -> None:
    path = tmp_path / "meta.gguf"
    writer = gguf.GGUFWriter(str(path), arch=ARCH)
    apply_metadata(writer, QWEN35_2B)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    fields = gguf.GGUFReader(path).fields
    written = {key: field.contents() for key, field in fields.items() if key.startswith(f"{ARCH}.")}
    expected = metadata(QWEN35_2B)
    assert set(written) == set(expected)
    for key, value in expected.items():
        assert written[key] == (pytest.approx(value, rel=1e-6) if isinstance(value, float) else value), key
