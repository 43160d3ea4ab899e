"""The settings that produced a run, written to ``run.json``: model file, engine, sampling, machine.

The model's parameter count (for the TFLOPs estimate) and quantization are read from the GGUF
header by the bounded scanner (``core.gguf_header``, memory-mapped: nothing is loaded); its
sha256 is hashed from the file, so a report names exactly the weights that produced it.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqale_desktop.core import file_hash
from sqale_desktop.core.agent.protocol import AgentProtocol


def gguf_facts(path: Path) -> dict[str, Any]:
    """``parameters`` (sum of tensor elements), ``quantization`` (the file type) and ``sha256``."""
    facts: dict[str, Any] = {"path": str(path), "parameters": None, "quantization": None, "sha256": None}
    try:
        # the bounded scanner, not gguf.GGUFReader (88-91 s and 4.8 GB on a hostile 24 MB header)
        from sqale_desktop.core.gguf_header import read_model_facts

        read = read_model_facts(path)
        facts["parameters"] = read.parameters
        if read.file_type is not None:
            import gguf

            try:
                facts["quantization"] = gguf.LlamaFileType(read.file_type).name.removeprefix("MOSTLY_")
            except ValueError:
                facts["quantization"] = str(read.file_type)
    except Exception as exc:  # a file that cannot be read: the run still records what it can
        facts["error"] = f"cannot read the GGUF header: {exc}"
    try:
        facts["sha256"] = file_hash.sha256_file(path)
    except OSError as exc:
        facts["error"] = f"cannot read {path}: {exc.strerror or exc}"
    return facts


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def protocol_facts(protocol: AgentProtocol) -> dict[str, Any]:
    return {
        "prompt_source": protocol.prompt_source,
        "sampling": asdict(protocol.sampling),
        "sampling_source": protocol.sampling_source,
        "tool_turns": protocol.tool_turns,
        "max_query_errors": protocol.max_query_errors,
        "tool_turn_tokens": protocol.tool_turn_tokens,
        "final_turn_tokens": protocol.final_turn_tokens,
        "episode_tokens": protocol.episode_tokens,
    }


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
