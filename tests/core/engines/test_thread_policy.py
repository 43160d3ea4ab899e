"""The OpenMP wait policy is set in-process before llama.cpp loads, and a user's own choice wins."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import REPO_ROOT

PROBE = (
    "import os, sys\n"
    "import sqale_desktop.core.engines.llama.engine as engine\n"
    "assert 'llama_cpp' not in sys.modules  # the engine loads llama.cpp lazily, after the policy\n"
    "print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'), engine.POLICY_NOTE)\n"
)


def run_probe(**env: str) -> str:
    clean = {
        k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
    }
    clean.update(env, PYTHONPATH=str(REPO_ROOT))
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=clean, capture_output=True, text=True, check=True, timeout=120
    )
    return out.stdout.strip()


def test_importing_the_engine_sets_a_short_spin() -> None:
    assert run_probe() == "None 3000 None"


def test_a_users_own_wait_setting_is_kept() -> None:
    assert run_probe(GOMP_SPINCOUNT="5000") == "None 5000 None"
    assert run_probe(OMP_WAIT_POLICY="ACTIVE") == "ACTIVE None None"


def test_loading_llama_cpp_first_is_reported() -> None:
    probe = "import llama_cpp\nimport sqale_desktop.core.engines.llama.engine as e\nprint(e.POLICY_NOTE)\n"
    clean = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    clean["PYTHONPATH"] = str(REPO_ROOT)
    out = subprocess.run(
        [sys.executable, "-c", probe], env=clean, capture_output=True, text=True, check=True, timeout=120
    )
    assert "loaded before" in out.stdout
