"""The run report's model facts (``eval run --model``) come from the bounded GGUF scanner: the same
figures as the ``gguf`` package's reader on a real layout, and a hostile header read by its lengths
(the package's reader took 88-91 s and 4.8 GB on 3 million empty strings)."""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import numpy as np

from sqale_desktop.core.eval.run_settings import gguf_facts
from sqale_desktop.core.gguf_header import read_model_facts


def test_the_facts_are_the_gguf_readers(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q8_0))
    writer.add_tensor("a", np.zeros((3, 5), dtype=np.float32))
    writer.add_tensor("b", np.zeros((7,), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    reader = gguf.GGUFReader(path)
    facts = read_model_facts(path)
    assert facts.parameters == sum(int(t.n_elements) for t in reader.tensors) == 22
    assert facts.file_type == int(gguf.LlamaFileType.MOSTLY_Q8_0)
    recorded = gguf_facts(path)
    assert (recorded["parameters"], recorded["quantization"]) == (22, "Q8_0")
    assert "error" not in recorded


def test_a_header_of_three_million_empty_strings(tmp_path: Path) -> None:
    path = tmp_path / "strings.gguf"
    key = b"tokenizer.ggml.tokens"
    count = 3_000_000
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
    header += struct.pack("<IIQ", 9, 8, count)  # an array of strings
    path.write_bytes(header + bytes(8 * count))  # each string: a length of 0
    facts = read_model_facts(path)
    assert (facts.parameters, facts.file_type) == (0, None)
    recorded = gguf_facts(path)
    assert recorded["parameters"] == 0 and recorded["sha256"] and "error" not in recorded
