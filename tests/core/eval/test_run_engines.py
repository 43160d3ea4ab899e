"""What an evaluation's ``run.json`` says about a local model: where it ran (issue 22)."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from sqale_desktop.core.engines.llama.backends import load_backends
from sqale_desktop.core.eval.engines import open_engines
from sqale_desktop.core.runtime import EngineFlags, choose
from sqale_desktop.core.settings import Settings
from tests.helpers import smollm2_gguf


@pytest.mark.slow
def test_a_local_run_names_the_backend_variant_and_device() -> None:
    smollm2_path = smollm2_gguf()
    runtime = choose(Settings(n_ctx=512), EngineFlags(engine="llama", model=smollm2_path))
    with ExitStack() as stack:
        engines = open_engines(runtime, stack)
        runs_on = engines.facts["runs_on"]
    # Without a GPU (CI's machines): the CPU variant ggml's scorer chose, and why not a GPU.
    assert runs_on.startswith(("local GPU (", f"local CPU ({load_backends().cpu_label}; "))
