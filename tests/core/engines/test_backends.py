"""The app's llama.cpp build loads its backends at run time: the best CPU variant, a forced one, and
a Vulkan backend that cannot load, each in a fresh process (ggml's registry is process-wide).

Each child loads SmolLM2 through ``LlamaEngine`` and generates greedily: every CPU variant this
CPU can run must give the same tokens, and say which variant it is in the engine's description.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sqale_desktop.core.engines.llama.backends import (
    CPU_VARIANT_ENV,
    VARIANT_FEATURES,
    Backends,
    load_backends,
    variant_files,
)

pytestmark = pytest.mark.slow

_SCRIPT = """
import json, sys, threading
from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.engines.llama.backends import loaded
engine = LlamaEngine(sys.argv[1], n_ctx=256, n_batch=64, n_ubatch=64, n_threads=1, n_gpu_layers="auto")
engine.load()
session = engine.new_session("<|im_start|>system\\nYou write SQL.<|im_end|>\\n")
session.append("<|im_start|>user\\nList the tables.<|im_end|>\\n<|im_start|>assistant\\n")
greedy = SamplingParams(temperature=0.0, top_k=1, top_p=1.0)
text = "".join(session.generate(12, greedy, threading.Event()))
backends = loaded()
print(json.dumps({"describe": engine.describe(), "tokens": session.history, "variant": backends.cpu_variant,
                  "gpu": list(backends.gpu), "notes": list(backends.notes)}))
engine.close()
"""


def _child(model: Path, **env: str) -> dict[str, object]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(model)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def backends() -> Backends:
    loaded = load_backends()
    assert loaded.dynamic, f"the app's build has dynamic backends; {loaded.folder} has no CPU variants"
    return loaded


@pytest.fixture(scope="module")
def best(smollm2_path: Path) -> dict[str, object]:
    return _child(smollm2_path)


def test_the_build_ships_its_cpu_variants_without_the_amx_one(backends: Backends) -> None:
    shipped = set(variant_files(backends.folder))
    assert {"x64", "haswell"} <= shipped
    assert "sapphirerapids" not in shipped  # the AMX kernels that crashed (packaging/llama_cpp_backends.py)
    assert shipped <= set(VARIANT_FEATURES)
    # ggml's scorer picks the highest level this CPU runs, and the baseline always runs.
    scores = dict(backends.cpu_variants)
    assert scores["x64"] > 0
    assert backends.cpu_variant == max((n for n, s in scores.items() if s > 0), key=lambda n: scores[n])


def test_the_best_variant_is_named_where_the_model_runs(best: dict[str, object], backends: Backends) -> None:
    assert best["variant"] == backends.cpu_variant
    assert str(best["describe"]).startswith(f"local CPU ({backends.cpu_label}; ")


def test_every_variant_this_cpu_runs_gives_the_same_greedy_tokens(
    smollm2_path: Path, best: dict[str, object], backends: Backends
) -> None:
    runnable = [name for name in backends.runnable_variants() if name != backends.cpu_variant]
    assert runnable, "this CPU runs at least the baseline besides its best variant"
    for name in runnable:
        forced = _child(smollm2_path, **{CPU_VARIANT_ENV: name})
        assert forced["variant"] == name
        assert str(forced["describe"]).startswith(f"local CPU ({name}: {VARIANT_FEATURES[name]}; ")
        assert forced["tokens"] == best["tokens"], name


def test_a_variant_this_cpu_cannot_run_is_refused_not_loaded(
    smollm2_path: Path, best: dict[str, object], backends: Backends
) -> None:
    unrunnable = [name for name, score in backends.cpu_variants if score == 0]
    cases = {"pentium4": "this build has no such variant"}
    if unrunnable:
        cases[unrunnable[-1]] = "this CPU cannot run it"
    for name, why in cases.items():
        refused = _child(smollm2_path, **{CPU_VARIANT_ENV: name})
        assert refused["variant"] == backends.cpu_variant
        assert f"CPU variant {name!r} ({CPU_VARIANT_ENV}) not used: {why}" in refused["notes"]  # type: ignore[operator]
        assert refused["tokens"] == best["tokens"]


def test_a_vulkan_loader_that_cannot_load_leaves_the_cpu_and_says_why(
    smollm2_path: Path, best: dict[str, object], backends: Backends, tmp_path: Path
) -> None:
    if not (backends.folder / "libggml-vulkan.so").exists():
        pytest.fail("the app's build carries the Vulkan backend (Makefile DEFAULT_CMAKE_ARGS)")
    # The dynamic loader searches LD_LIBRARY_PATH first: a libvulkan.so.1 there that is not a
    # library stands for a missing or broken Vulkan loader.
    (tmp_path / "libvulkan.so.1").write_bytes(b"not a library")
    broken = _child(smollm2_path, LD_LIBRARY_PATH=str(tmp_path), GGML_VK_VISIBLE_DEVICES="0")
    assert broken["gpu"] == []
    notes = [str(n) for n in broken["notes"]]  # type: ignore[attr-defined]
    assert any(n.startswith("Vulkan: ") and "libvulkan.so.1" in n for n in notes), notes
    describe = str(broken["describe"])
    assert describe.startswith(f"local CPU ({backends.cpu_label}; Vulkan: ")
    assert broken["tokens"] == best["tokens"]
