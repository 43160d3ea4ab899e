"""``benchmarks/answer_time.py --quick`` runs end to end and ends with its one JSON object.

What is checked is behaviour, never a time: the episode the benchmark built from the published
SQaLe episode has the app's prompt shape and the figures' keys are all there; the second launch
restored the system turn from the disk cache; and over the first launch and its episode every
prompt token was evaluated exactly once (the last ``<|im_end|>`` is sampled, never evaluated).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT, shared_data

TOP_KEYS = (
    "seconds_per_answer", "prefill_tok_s", "decode_tok_s", "first_token_s", "evaluated_over_prompt",
    "thinking", "tokenizer", "episode_tokens", "runs", "chosen_cpu_variant",
)  # fmt: skip
TIME_KEYS = ("cold", "warm_disk_cache", "during_background_load", "open_app")


@pytest.mark.slow
def test_quick_run_ends_with_the_figures_as_json(isolated_home: Path) -> None:
    shared_data("sqale_episodes/episodes.json")
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / "answer_time.py"), "--quick"],
        cwd=REPO_ROOT, env={**os.environ, "SQALE_DESKTOP_HOME": str(isolated_home)},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    for key in TOP_KEYS:
        assert key in figures, key
    assert figures["quick"] is True
    variant = figures["chosen_cpu_variant"] or "linked"
    assert list(figures["runs"]) == [variant]  # --quick: the chosen variant only
    run = figures["runs"][variant]
    assert set(TIME_KEYS) <= set(run["first_token_s"])
    assert all(run["first_token_s"][k] is not None and run["first_token_s"][k] > 0 for k in TIME_KEYS)
    assert run["launches"]["cold"]["restored_from_disk"] is False
    assert run["launches"]["warm"]["restored_from_disk"] is True
    assert run["seconds_per_answer"] > 0 and run["prefill_tok_s"] > 0 and run["decode_tok_s"] > 0

    episode = run["episode"]
    assert episode["model_turns"] == 5  # Alert share: five rounds, the last one submit_sql
    assert episode["thinking_tokens"] == [32] * 5
    assert episode["tool_result_tokens"][-1] == 0
    parts = (
        episode["system_turn_tokens"]
        + episode["user_turn_tokens"]
        + episode["completion_tokens"]
        + sum(episode["tool_result_tokens"])
    )
    assert episode["prompt_tokens"] == parts
    replay = run["replay"]
    assert replay["prompt_tokens"] >= episode["prompt_tokens"]  # + BOS where the model wants one
    assert replay["decoded_tokens"] == episode["completion_tokens"] - episode["model_turns"]
    # The system turn came from the cache; with the warm-up's evaluation, each token once.
    assert replay["evaluated_tokens"] == replay["prompt_tokens"] - 1 - (
        replay["prompt_tokens"] - episode["prompt_tokens"] + episode["system_turn_tokens"]
    )
