"""GPU offload figures: prefill/decode tok/s and a 7-turn episode's wall time for 0, half and all layers.

Runs unchanged on any machine whose llama-cpp-python build offloads (CUDA, Metal, Vulkan) and on a
CPU-only build (then only the 0-layer row is measured, and the JSON says why).  The model is a
random-weight GGUF with Qwen3.5-2B's exact text shapes packed as Q4_K_M, written once into the
app's cache folder (``--quick``: a small qwen35 shape): speed and memory carry over to the real
model, output quality does not.  The episode is the agent loop's token stream without the tools:
a system turn, then seven rounds of tool-result text appended and a completion generated, with
the engine's cache reused between rounds as in a real episode.  See packaging/gpu-check.md.

    .venv/bin/python benchmarks/gpu.py [--quick] [--model GGUF] [--threads N]

Ends with one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import platform
import threading
import time
from pathlib import Path
from typing import Any

from sqale_desktop.core import paths
from sqale_desktop.core.engine_options import GpuLayers
from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.engines.llama import offload
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.engines.qwen35_layout import QWEN35_2B, Qwen35Shape
from sqale_desktop.core.engines.synthetic_gguf import SMALL_SHAPE, quantize, write_qwen35_gguf

SAMPLING = SamplingParams(temperature=0.6, top_p=0.95, top_k=20, seed=0)
SYSTEM = (
    "<|im_start|>system\nYou answer questions about a SQLite database by exploring it with tools. "
    + "Call list_tables, describe_table, sample_rows, run_query and submit_sql. " * 20
    + "<|im_end|>\n"
)


def user_turn(turn: int, rows: int) -> str:
    body = "".join(
        f"Tool result: row {turn}.{i}: id={i}, name=Item {i}, total={i * 3.5}\n" for i in range(rows)
    )
    return (
        f"<|im_start|>user\n{body}[{6 - turn} tool turns left before you must answer]<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n"
    )


def benchmark_model(quick: bool, override: Path | None) -> Path:
    if override is not None:
        return override
    shape: Qwen35Shape = SMALL_SHAPE if quick else QWEN35_2B
    label = "qwen35-small" if quick else "qwen35-2b-shape"
    folder = paths.cache_dir() / "bench"
    target = folder / f"{label}-Q4_K_M.gguf"
    if not target.exists():
        f16 = write_qwen35_gguf(folder / f"{label}-F16.gguf", shape, seed=0)
        quantize(f16, target.with_suffix(".tmp"), ftype="Q4_K_M")
        target.with_suffix(".tmp").rename(target)
        f16.unlink()
    return target


def measure(path: Path, layers: GpuLayers, threads: int | None, quick: bool) -> dict[str, Any]:
    started = time.perf_counter()
    engine = LlamaEngine(path, n_ctx=4096 if quick else 16384, n_gpu_layers=layers, n_threads=threads)
    engine.load()
    load_s = time.perf_counter() - started
    cancel = threading.Event()
    rows, tokens = (2, 16) if quick else (6, 64)
    try:
        # Prefill and decode speed on one long turn.
        session = engine.new_session(SYSTEM)
        session.append(user_turn(0, 40 if quick else 120))
        for _ in session.generate(tokens, SAMPLING, cancel):
            pass
        stats = session.stats
        prefill = stats.evaluated_tokens - stats.completion_tokens
        row: dict[str, Any] = {
            "requested_layers": layers,
            "gpu_layers": engine.model.gpu_layers,
            "engine": engine.describe(),
            "device_mib": round(engine.model.device_bytes / 2**20, 1),
            "load_s": round(load_s, 2),
            "prefill_tok_s": round(prefill / stats.prefill_seconds, 1) if stats.prefill_seconds else None,
            "decode_tok_s": round(stats.completion_tokens / stats.decode_seconds, 1)
            if stats.decode_seconds
            else None,
        }
        # A full 7-turn episode, cache reused between turns as the agent loop does.
        episode_started = time.perf_counter()
        episode = engine.new_session(SYSTEM)
        for turn in range(7):
            episode.append(user_turn(turn, rows))
            for _ in episode.generate(tokens, SAMPLING, cancel):
                pass
            episode.end_turn()
        row["episode_s"] = round(time.perf_counter() - episode_started, 2)
        row["episode_tokens"] = {
            "prompt": episode.stats.prompt_tokens,
            "completion": episode.stats.completion_tokens,
            "evaluated": episode.stats.evaluated_tokens + episode.reused_tokens,
        }
        row["notes"] = list(engine.notes)
        return row
    finally:
        engine.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small qwen35 shape, fewer tokens")
    parser.add_argument("--model", type=Path, help="measure this GGUF instead of the synthetic one")
    parser.add_argument("--threads", type=int, help="CPU threads (default: one per physical core)")
    parser.add_argument(
        "--layers",
        help="comma-separated layer settings to measure instead of 0,half,all (e.g. 'all' on a slow device)",
    )
    args = parser.parse_args()

    import llama_cpp

    from sqale_desktop.core.engines.llama.backends import load_backends

    load_backends()  # the app's build has dynamic backends: register them first

    path = benchmark_model(args.quick, args.model)
    devices = offload.offload_devices() or []
    footprint = offload.read_footprint(path)
    n_layers = footprint.n_layers if footprint else 0
    offloads = bool(llama_cpp.llama_supports_gpu_offload()) and bool(devices)
    plan: list[GpuLayers] = [0, max(n_layers // 2, 1), "all"] if offloads else [0]
    if args.layers:
        plan = [int(item) if item.isdigit() else "all" for item in args.layers.split(",")]
    rows = []
    for layers in plan:
        row = measure(path, layers, args.threads, args.quick)
        print(
            f"layers={layers!s:>4}: {row['engine']}, prefill {row['prefill_tok_s']} tok/s, "
            f"decode {row['decode_tok_s']} tok/s, 7-turn episode {row['episode_s']} s"
        )
        rows.append(row)
    result = {
        "benchmark": "gpu",
        "quick": args.quick,
        "model": path.name,
        "model_mib": round(path.stat().st_size / 2**20, 1),
        "machine": platform.machine(),
        "system": platform.system(),
        "offload_supported": offloads,
        "devices": [device.label() for device in devices],
        "why_cpu_only": None if offloads else "this llama.cpp build or machine offers no GPU device",
        "runs": rows,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
