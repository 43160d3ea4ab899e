"""GPU offload: device discovery, the layer plan, llama.cpp's buffer report, and a real offloaded run.

The first half runs everywhere (a CPU build lists no device; the plan and the report are plain
functions over real GGUF headers and real llama.cpp log lines).  The tests marked ``gpu`` need a
llama.cpp build that offloads and a device: ``make gpu-test`` runs them with the Vulkan build on
Mesa's software Vulkan driver (lavapipe), where every offload code path is the real one.  There,
``SQALE_DESKTOP_EXPECT_GPU=1`` turns a missing device into a failure instead of a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.engines.llama import gpu, offload
from sqale_desktop.core.engines.llama.backends import load_backends
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.engines.llama.loading import gpu_layer_attempts
from sqale_desktop.core.engines.synthetic_gguf import TINY_SHAPE
from tests.core.engines.llama_helpers import (
    GREEDY,
    SYSTEM,
    CancelInChunk,
    evaluated,
    long_turn_pending,
    run,
    user_turn,
)

EXPECT_GPU = os.environ.get("SQALE_DESKTOP_EXPECT_GPU") == "1"


# -- everywhere ------------------------------------------------------------------------------


def test_footprint_of_the_hybrid_model_separates_attention_and_recurrent_blocks(tiny_path: Path) -> None:
    footprint = offload.read_footprint(tiny_path)
    assert footprint is not None
    assert footprint.n_layers == TINY_SHAPE.num_hidden_layers
    interval = TINY_SHAPE.full_attention_interval
    for block in range(footprint.n_layers):
        attention = (block + 1) % interval == 0
        assert (footprint.kv_bytes_per_token[block] > 0) == attention
        assert (footprint.state_bytes[block] > 0) == (not attention)
        assert footprint.layer_bytes[block] > 0
    assert footprint.output_bytes > 0
    # More context costs more only through the attention blocks' KV cache.
    grown = footprint.layers_bytes(footprint.n_layers, 2048) - footprint.layers_bytes(
        footprint.n_layers, 1024
    )
    assert grown == 1024 * sum(footprint.kv_bytes_per_token)


def test_footprint_of_an_attention_model(tiny_path: Path, smollm2_path: Path) -> None:
    footprint = offload.read_footprint(smollm2_path)
    assert footprint is not None and footprint.n_layers == 30
    assert all(kv > 0 for kv in footprint.kv_bytes_per_token)
    assert not any(footprint.state_bytes)
    assert offload.read_footprint(tiny_path.with_name("missing.gguf")) is None


def test_layers_that_fit_respects_the_budget_and_offloads_from_the_end() -> None:
    footprint = offload.ModelFootprint(
        layer_bytes=(100 * offload.MIB,) * 4,
        output_bytes=50 * offload.MIB,
        kv_bytes_per_token=(0, 0, 0, 1024),
        state_bytes=(10 * offload.MIB, 10 * offload.MIB, 10 * offload.MIB, 0),
    )
    reserve = offload.reserve_bytes(0)
    # The last block alone: weights + 1 KiB per token.
    assert footprint.layers_bytes(1, 1024) == 100 * offload.MIB + 1024 * 1024
    assert offload.layers_that_fit(footprint, 1024, reserve) == 0
    assert offload.layers_that_fit(footprint, 1024, reserve + 101 * offload.MIB) == 1
    assert offload.layers_that_fit(footprint, 1024, reserve + 211 * offload.MIB) == 2
    everything = footprint.layers_bytes(4, 1024)
    assert everything == 4 * 100 * offload.MIB + 30 * offload.MIB + offload.MIB + 50 * offload.MIB
    assert offload.layers_that_fit(footprint, 1024, reserve + everything) == 5  # all, head included
    # Budgets never go below the plan: each count fits, the next one does not.
    for free in range(reserve, reserve + everything, 37 * offload.MIB):
        fit = offload.layers_that_fit(footprint, 1024, free)
        assert footprint.layers_bytes(fit, 1024) <= free - offload.reserve_bytes(free)


def test_auto_starts_from_the_plan_and_explicit_counts_are_kept() -> None:
    assert gpu_layer_attempts("auto", True, 24, fit=10) == [10, 5, 2, 1, 0]
    assert gpu_layer_attempts("auto", True, 24, fit=25) == [-1, 12, 6, 3, 1, 0]  # everything fits
    assert gpu_layer_attempts("auto", True, 24, fit=0) == [0]
    assert gpu_layer_attempts("all", True, 24, fit=3) == [-1, 12, 6, 3, 1, 0]
    assert gpu_layer_attempts(8, True, 24, fit=3) == [8, 4, 2, 1, 0]
    assert gpu_layer_attempts("auto", False, 24, fit=10) == [0]


def test_buffer_report_reads_llama_cpp_lines() -> None:
    report = offload.BufferReport()
    for line in [
        "load_tensors:      Vulkan0 model buffer size =   812.25 MiB\n",
        "load_tensors:   CPU_Mapped model buffer size =   408.00 MiB\n",
        "llama_kv_cache:    Vulkan0 KV buffer size =   192.00 MiB\n",
        "llama_memory_recurrent:    Vulkan0 RS buffer size =    18.84 MiB\n",
        "llama_context: Vulkan_Host  output buffer size =     0.95 MiB\n",
        "llama_context:    Vulkan0 compute buffer size =   124.50 MiB\n",
        "llama_context: Vulkan_Host compute buffer size =     8.01 MiB\n",
        "print_info: file type   = Q4_K - Medium\n",
    ]:
        report.feed(line)
    assert len(report.buffers) == 7
    assert report.device_names() == ["Vulkan0"]
    assert (
        report.device_bytes() == int((812.25 + 192 + 18.84 + 124.5) * offload.MIB)
        or abs(report.device_bytes() - (812.25 + 192 + 18.84 + 124.5) * offload.MIB) < 4
    )


def test_a_real_load_is_reported_buffer_by_buffer(tiny_path: Path) -> None:
    engine = LlamaEngine(tiny_path, n_ctx=512, n_batch=64, n_ubatch=64, n_threads=1, n_gpu_layers=0)
    with offload.buffer_report() as report:
        engine.load()
    try:
        kinds = {what for _buffer, what, _size in report.buffers}
        assert {"model", "KV", "RS", "compute"} <= kinds  # the hybrid model has both caches
        # No weights or caches on a device (a GPU build may still keep a compute buffer there).
        assert report.device_bytes(offload.WEIGHTS_AND_CACHES) == 0
        assert engine.describe().startswith("local CPU (")
    finally:
        engine.close()


def test_the_report_names_what_the_build_offers() -> None:
    import llama_cpp

    report = gpu.gpu_offload()
    devices = offload.offload_devices()
    if not llama_cpp.llama_supports_gpu_offload():
        expected = "finds no GPU" if load_backends().gpu else "CMAKE_ARGS"
        assert devices == [] and not report.supported and expected in report.message
    elif devices:
        assert report.supported and len(report.devices) == len(devices)
        assert devices[0].name in report.message and devices[0].total_bytes > 0
    else:
        assert not report.supported and "no GPU" in report.message


# -- with a device ---------------------------------------------------------------------------


def _devices() -> list[offload.OffloadDevice]:
    devices = offload.offload_devices() or []
    if not devices:
        if EXPECT_GPU:
            pytest.fail("SQALE_DESKTOP_EXPECT_GPU=1 but llama.cpp lists no GPU device")
        pytest.skip("needs a llama.cpp build that offloads and a device (make gpu-test: Vulkan on lavapipe)")
    return devices


@pytest.fixture(scope="module")
def gpu_engine(tiny_path: Path) -> Iterator[LlamaEngine]:
    _devices()
    engine = LlamaEngine(tiny_path, n_ctx=2048, n_batch=64, n_ubatch=64, n_threads=1, n_gpu_layers="all")
    engine.load()
    yield engine
    engine.close()


@pytest.mark.gpu
def test_all_layers_offload_and_the_status_says_so(gpu_engine: LlamaEngine) -> None:
    device = _devices()[0]
    assert gpu_engine.model.gpu_layers == TINY_SHAPE.num_hidden_layers
    assert gpu_engine.describe() == (
        f"local GPU ({TINY_SHAPE.num_hidden_layers} layers on {device.name}: {device.description})"
    )
    assert gpu_engine.model.device_bytes > 0
    assert any(device.name in note and "allocated" in note for note in gpu_engine.notes)
    assert gpu_engine.info().gpu_layers == TINY_SHAPE.num_hidden_layers


@pytest.mark.gpu
@pytest.mark.parametrize("layers", [0, 2, "all"])
def test_none_n_and_all_do_what_they_say(tiny_path: Path, layers: int | str) -> None:
    _devices()
    engine = LlamaEngine(tiny_path, n_ctx=512, n_batch=64, n_ubatch=64, n_threads=1, n_gpu_layers=layers)  # type: ignore[arg-type]
    with offload.buffer_report() as report:
        engine.load()
    try:
        expected = TINY_SHAPE.num_hidden_layers if layers == "all" else layers
        assert engine.model.gpu_layers == expected
        assert (report.device_bytes(frozenset({"model"})) > 0) == (expected != 0)
        assert (report.device_bytes(frozenset({"KV", "RS"})) > 0) == (expected != 0)
        assert engine.describe().startswith("local GPU" if expected else "local CPU")
    finally:
        engine.close()


@pytest.mark.gpu
def test_auto_plans_layers_for_a_device_memory_limit(tiny_path: Path) -> None:
    _devices()
    footprint = offload.read_footprint(tiny_path)
    assert footprint is not None
    n_ctx = 512
    # A limit that holds exactly the last two blocks after the reserve.
    limit = offload.reserve_bytes(0) + footprint.layers_bytes(2, n_ctx) + 1024
    engine = LlamaEngine(
        tiny_path,
        n_ctx=n_ctx,
        n_batch=64,
        n_ubatch=64,
        n_threads=1,
        n_gpu_layers="auto",
        gpu_memory_limit=limit,
    )
    engine.load()
    try:
        assert engine.model.gpu_layers == 2
        assert any(note.startswith("auto: 2 of") for note in engine.notes)
    finally:
        engine.close()
    roomy = LlamaEngine(tiny_path, n_ctx=n_ctx, n_batch=64, n_ubatch=64, n_threads=1, n_gpu_layers="auto")
    roomy.load()
    try:
        assert roomy.model.gpu_layers == TINY_SHAPE.num_hidden_layers
    finally:
        roomy.close()


_LOAD_SCRIPT = """
import json, sys
from sqale_desktop.core.engines.llama.engine import LlamaEngine
layers = int(sys.argv[2]) if sys.argv[2].isdigit() else sys.argv[2]
engine = LlamaEngine(sys.argv[1], n_ctx=512, n_batch=64, n_ubatch=64, n_threads=1, n_gpu_layers=layers)
engine.load()
session = engine.new_session("<|im_start|>system\\nhi<|im_end|>\\n")
session.append("<|im_start|>user\\nList the tables.<|im_end|>\\n<|im_start|>assistant\\n")
from sqale_desktop.core.engines.base import SamplingParams
import threading
text = "".join(session.generate(4, SamplingParams(temperature=0.0, top_k=1, top_p=1.0), threading.Event()))
print(json.dumps({"gpu_layers": engine.model.gpu_layers, "notes": engine.notes, "describe": engine.describe(),
                  "tokens": session.history, "completion_tokens": session.stats.completion_tokens}))
engine.close()
"""


def _load_in_child(path: Path, layers: str, **env: str) -> dict[str, object]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env}
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_SCRIPT, str(path), layers],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.gpu
def test_a_load_that_cannot_offload_ends_on_the_cpu_and_says_so(smollm2_path: Path) -> None:
    _devices()
    # ggml-vulkan reads this at device set-up: no device buffer may exceed 64 KiB, less than one of
    # SmolLM2's block tensors, as on a card without room.  The larger attempts fail to load
    # (llama.cpp cannot allocate the context); the last leaves every weight in host memory.
    result = _load_in_child(smollm2_path, "all", GGML_VK_FORCE_MAX_BUFFER_SIZE="65536")
    assert result["gpu_layers"] == 0
    assert str(result["describe"]).endswith("; loading on the GPU failed)")
    notes = [str(note) for note in result["notes"]]  # type: ignore[attr-defined]
    assert any(note.startswith("loading with more GPU layers failed") for note in notes)
    assert any(note.startswith("llama.cpp kept all weights in host memory") for note in notes)
    assert result["completion_tokens"] == 4  # and it still answers


@pytest.mark.gpu
def test_seven_turn_episode_with_offload_evaluates_each_prompt_token_once(gpu_engine: LlamaEngine) -> None:
    session = gpu_engine.new_session(SYSTEM)
    for turn in range(7):
        session.append(
            user_turn(f"Tool result: row {turn}\n[{6 - turn} tool turns left before you must answer]")
        )
        run(session, 24, SamplingParams(seed=turn))
        session.end_turn()
    stats = session.stats
    ran = evaluated(session)
    assert stats.prompt_tokens == len(session.history)
    assert stats.prompt_tokens - 2 <= ran <= stats.prompt_tokens - 1
    assert gpu_engine.evaluated_tokens == session.history[:ran]


@pytest.mark.gpu
def test_cancel_inside_an_offloaded_prefill_keeps_memory_consistent(gpu_engine: LlamaEngine) -> None:
    session = long_turn_pending(gpu_engine)
    assert len(session.history) - len(gpu_engine.evaluated_tokens) > 3 * gpu_engine.n_batch
    aborted = gpu_engine.counters.aborted_chunks
    assert run(session, 8, GREEDY, CancelInChunk(gpu_engine, chunks=2)) == ""
    assert gpu_engine.counters.aborted_chunks == aborted + 1
    assert session.last_finish_reason == "cancelled"
    held = gpu_engine.evaluated_tokens
    assert held == session.history[: len(held)] and len(held) < len(session.history)
    resumed = run(session, 8, GREEDY)
    assert evaluated(session) == len(session.history) - 1  # nothing evaluated twice
    # The same turn without the cancel gives the same tokens: the restored device state is right.
    reference = long_turn_pending(gpu_engine)
    assert run(reference, 8, GREEDY) == resumed


@pytest.mark.gpu
def test_rewind_with_offload_regenerates_the_same_turn(gpu_engine: LlamaEngine) -> None:
    session = gpu_engine.new_session(SYSTEM)
    session.append(user_turn("List the tables."))
    mark = session.checkpoint()
    prompt = list(session.history)
    first = run(session, 10, SamplingParams(temperature=1.0, top_k=0, top_p=1.0, seed=1))
    ran = evaluated(session)
    session.rewind(mark)
    assert session.history == prompt
    second = run(session, 10, SamplingParams(temperature=1.0, top_k=0, top_p=1.0, seed=1))
    assert second == first
    assert evaluated(session) - ran == len(session.history) - len(prompt)


_TOP2_SCRIPT = """
import json, sys
import numpy as np
from sqale_desktop.core.engines.llama.backends import load_backends
load_backends()
import llama_cpp
llm = llama_cpp.Llama(sys.argv[1], n_ctx=512, n_batch=64, n_ubatch=64, n_threads=1,
                      n_gpu_layers=int(sys.argv[2]), verbose=False)
llm.eval(json.loads(sys.argv[3]))
row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
top = [int(i) for i in np.argsort(-row)[:2]]
print(json.dumps({"top": top, "logits": [float(row[i]) for i in top]}))
"""
# Logits closer than this are a tie that float summation order decides: the CPU's kernels (one
# per CPU variant: AVX2, AVX-512, ...) and lavapipe's shaders add in different orders.
_TIE = 0.1


def _top2(path: Path, layers: int, tokens: list[int]) -> dict[str, list[float]]:
    done = subprocess.run(
        [sys.executable, "-c", _TOP2_SCRIPT, str(path), str(layers), json.dumps(tokens)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result: dict[str, list[float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["qwen35-tiny", "smollm2"])
def test_greedy_tokens_match_the_cpu_build(tiny_path: Path, smollm2_path: Path, model: str) -> None:
    """The same build on the CPU and offloaded to lavapipe: the same greedy tokens, up to a tie.

    Where the two first differ, both devices must rank the same two tokens first with the CPU's
    logits within ``_TIE`` of each other: a near-tie, not a wrong kernel (a wrong kernel moves
    logits by whole units and breaks the ranking).
    """
    _devices()
    path = tiny_path if model == "qwen35-tiny" else smollm2_path
    offloaded = _load_in_child(path, "all")
    assert offloaded["gpu_layers"] != 0
    on_cpu = _load_in_child(path, "0")
    assert str(on_cpu["describe"]).endswith("; GPU off in Settings)")
    gpu_tokens, cpu_tokens = list(offloaded["tokens"]), list(on_cpu["tokens"])  # type: ignore[call-overload]
    if gpu_tokens == cpu_tokens:
        return
    first = next(i for i, (a, b) in enumerate(zip(gpu_tokens, cpu_tokens, strict=False)) if a != b)
    cpu_top = _top2(path, 0, cpu_tokens[:first])
    gpu_top = _top2(path, -1, cpu_tokens[:first])
    assert set(cpu_top["top"]) == set(gpu_top["top"]) == {gpu_tokens[first], cpu_tokens[first]}
    margin = cpu_top["logits"][0] - cpu_top["logits"][1]
    assert margin < _TIE, f"token {first}: the CPU prefers {cpu_top['top'][0]} by {margin:.3f}"
