"""Speed, cache reuse and cancel latency of the in-process llama.cpp engine.

Runs on a random-weight GGUF with Qwen3.5-2B's exact text shapes, quantized to Q4_K_M with
llama.cpp's own quantizer (written once into the app's cache folder, never into the repo):
speed and memory carry over to the real model, output quality does not.  ``--quick`` uses a
smaller qwen35 shape (hidden 512, 8 blocks, vocabulary 32k) so it finishes in under a minute; the
JSON says which shape was used.

Figures (ONE JSON object on the last line):
- ``prefill_tok_s`` / ``decode_tok_s``: over a 7-turn episode kept at token level;
- ``episode.ratio``: evaluated / prompt tokens over that episode (target <= 1.02), against
  ``naive.ratio``: the same turns through ``Llama.create_completion`` with the whole prompt text
  resubmitted each turn (llama.cpp's own counters say what it evaluated).  The synthetic
  vocabulary has tokens its tokenizer never produces, so re-tokenizing sampled text nearly always
  differs and the naive loop re-evaluates nearly every turn; with the real vocabulary that
  happens about once in 40 completions, and each time costs the whole prompt;
- ``decode_ratio_vs_bare_generate``: the engine's decode rate over bare ``Llama.generate`` on the
  same file and settings, best of interleaved runs (target >= 0.97); on a shared machine this
  swings by several percent from run to run, so ``decode_ratio_from_overhead`` gives the same
  ratio from what the two loops actually do differently: their per-token time outside
  ``llama_decode`` (``outside_decode_ms_per_token``) added to the measured decode time;
- ``cancel_ms``: from ``cancel.set()`` on another thread to ``generate`` returning, while decoding
  and while prefilling a long turn (target <= 200 ms);
- ``decode_loaded_ratio``: the engine's decode rate with one busy background process over its
  rate without (target >= 0.4 on 2 cores), with the thread count its governor settled on
  (``decode_loaded_threads``), and ``idle_decode_ratio_vs_best``: the engine's setting (its wait
  policy, one thread per core, which the governor keeps on an idle machine) idle, over the best
  (policy, threads) of an idle sweep, each in a fresh process (target >= 0.95); what the
  governor itself costs idle shows in ``decode_ratio_vs_bare_generate`` (bare llama.cpp keeps
  every thread).  On a machine shared with other work "idle" is only as idle as the others
  leave it.  ``--busy-only`` measures just these figures and ``decode_ratio_vs_bare_generate``.
- ``--policy-sweep``: decode and prefill for threads 1..cores x wait policies x 0, 1 and 2 busy
  background processes (``decode_probe.py`` in a fresh process each).

    .venv/bin/python benchmarks/engine.py [--quick] [--threads N] [--model GGUF] [--busy-only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqale_desktop.core import paths
from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.engines.llama import thread_policy
from sqale_desktop.core.engines.llama.cpu_info import physical_cores
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.engines.llama.session import LlamaSession
from sqale_desktop.core.engines.qwen35_layout import QWEN35_2B, Qwen35Shape
from sqale_desktop.core.engines.synthetic_gguf import SMALL_SHAPE, quantize, write_qwen35_gguf

SAMPLING = SamplingParams(temperature=0.6, top_p=0.95, top_k=20, min_p=0.0, repeat_penalty=1.0, seed=0)

SYSTEM_PARAGRAPH = (
    "You are a text-to-SQL agent. You answer a question about a SQLite database by calling tools. "
    "The tools are list_tables, describe_table, sample_rows, run_query, column_values, "
    "find_columns, count_rows and submit_sql. Plan: list the tables, inspect the relevant ones, "
    "run small queries to check joins and values, then submit one final SQL query.\n"
)


def system_prompt(paragraphs: int) -> str:
    return "<|im_start|>system\n" + SYSTEM_PARAGRAPH * paragraphs + "<|im_end|>\n"


def user_turn(turn: int, rows: int) -> str:
    body = "".join(
        f"Tool result: row {turn}.{i}: id={i}, name=Item {i}, total={i * 3.5}\n" for i in range(rows)
    )
    return f"<|im_start|>user\n{body}[{6 - turn} tool turns left before you must answer]<|im_end|>\n" + (
        "<|im_start|>assistant\n<think>\n"
    )


def benchmark_model(quick: bool, override: Path | None) -> tuple[Path, str]:
    """The Q4_K_M file to measure, written (once) into the app's cache folder."""
    if override is not None:
        return override, override.name
    shape: Qwen35Shape = SMALL_SHAPE if quick else QWEN35_2B
    label = "qwen35-small" if quick else "qwen35-2b-shape"
    return cached_model(label, shape), label


def cached_model(
    label: str, shape: Qwen35Shape, tokenizer: Callable[[Any, Qwen35Shape], None] | None = None
) -> Path:
    """The random-weight Q4_K_M file ``label`` of ``shape`` (with ``tokenizer``'s vocabulary when
    given), written once into the app's cache folder; the benchmarks that share a model share it."""
    folder = paths.cache_dir() / "bench"
    target = folder / f"{label}-Q4_K_M.gguf"
    if not target.exists():
        started = time.perf_counter()
        f16 = write_qwen35_gguf(folder / f"{label}-F16.gguf", shape, seed=0, tokenizer=tokenizer)
        written = time.perf_counter() - started
        quantize(f16, target.with_suffix(".tmp"), ftype="Q4_K_M")
        target.with_suffix(".tmp").rename(target)
        f16.unlink()
        quantized = time.perf_counter() - started - written
        print(f"wrote {target} (F16 {written:.1f} s, then Q4_K_M {quantized:.1f} s)")
    return target


def engine_episode(
    engine: LlamaEngine, turns: int, paragraphs: int, rows: int, tokens: int
) -> dict[str, Any]:
    session = engine.new_session(system_prompt(paragraphs))
    cancel = threading.Event()
    for turn in range(turns):
        session.append(user_turn(turn, rows))
        for _ in session.generate(tokens, SAMPLING, cancel):
            pass
        session.end_turn()
    stats = session.stats
    prefill_tokens = stats.evaluated_tokens - (stats.completion_tokens - turns)
    return {
        "turns": turns,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "evaluated_tokens": stats.evaluated_tokens,
        "ratio": round(stats.evaluated_tokens / stats.prompt_tokens, 4),
        "prefill_tok_s": round(prefill_tokens / stats.prefill_seconds, 2),
        "decode_tok_s": round(stats.completion_tokens / stats.decode_seconds, 2),
        "seconds": round(stats.prefill_seconds + stats.decode_seconds, 2),
        "prompt_text": session.prompt_text,
    }


def naive_episode(llm: Any, turns: int, paragraphs: int, rows: int, tokens: int) -> dict[str, Any]:
    """Resubmit the whole prompt text each turn, as a loop built on create_completion would."""
    import llama_cpp

    llm.reset()
    llama_cpp.llama_perf_context_reset(llm.ctx)
    prompt = system_prompt(paragraphs)
    started = time.perf_counter()
    completion_tokens = 0
    for turn in range(turns):
        prompt += user_turn(turn, rows)
        out = llm.create_completion(
            prompt,
            max_tokens=tokens,
            temperature=SAMPLING.temperature,
            top_p=SAMPLING.top_p,
            top_k=SAMPLING.top_k,
            min_p=SAMPLING.min_p,
            repeat_penalty=SAMPLING.repeat_penalty,
            seed=SAMPLING.seed,
            stop=["<|im_end|>", "<|endoftext|>"],
        )
        completion_tokens += int(out["usage"]["completion_tokens"])
        prompt += out["choices"][0]["text"] + "<|im_end|>"
    perf = llama_cpp.llama_perf_context(llm.ctx)
    evaluated = int(perf.n_p_eval) + int(perf.n_eval)
    prompt_tokens = len(llm.tokenize(prompt.encode(), add_bos=False, special=True))
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "evaluated_tokens": evaluated,
        "ratio": round(evaluated / prompt_tokens, 4),
        "seconds": round(time.perf_counter() - started, 2),
    }


class DecodeTimer:
    """Times every ``llama_decode`` call while active, for both loops (they call the same C function).

    The per-token time *outside* ``llama_decode`` (sampling, detokenizing, Python) is the only
    place the engine and bare ``generate`` can differ; unlike their end-to-end rates it is not
    swamped by other processes competing for the two cores.
    """

    def __init__(self) -> None:
        import llama_cpp
        import llama_cpp.llama_cpp as low_level

        self.active = False
        self.seconds = 0.0
        self.calls = 0
        self._modules = (llama_cpp, low_level)
        self._original = low_level.llama_decode

        def timed(ctx: Any, batch: Any) -> int:
            if not self.active:
                return int(self._original(ctx, batch))
            started = time.perf_counter()
            try:
                return int(self._original(ctx, batch))
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1

        for module in self._modules:
            module.llama_decode = timed

    def start(self) -> None:
        self.active, self.seconds, self.calls = True, 0.0, 0


@dataclass
class DecodeRun:
    """One timed generation: tokens and seconds from the first token on, and decode calls within."""

    tokens: int
    seconds: float
    decode_seconds: float

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds

    @property
    def overhead_ms(self) -> float:
        """Milliseconds per token spent outside ``llama_decode``."""
        return (self.seconds - self.decode_seconds) / self.tokens * 1000


def engine_decode_run(engine: LlamaEngine, prompt: str, tokens: int, timer: DecodeTimer) -> DecodeRun:
    """Tokens per second from the first streamed token to the last (prefill excluded)."""
    session = engine.new_session(prompt)
    first: tuple[float, int] | None = None
    timer.active = False
    for _ in session.generate(tokens, SAMPLING, threading.Event()):
        if first is None:
            first = (time.perf_counter(), session.stats.completion_tokens)
            timer.start()
    end = time.perf_counter()
    timer.active = False
    assert first is not None
    return DecodeRun(session.stats.completion_tokens - first[1], end - first[0], timer.seconds)


def bare_decode_run(llm: Any, prompt: str, tokens: int, timer: DecodeTimer) -> DecodeRun:
    """The same measurement on llama-cpp-python's own ``generate`` loop."""
    llm.reset()
    ids = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    count, first = 0, 0.0
    timer.active = False
    stream = llm.generate(
        ids,
        top_k=SAMPLING.top_k,
        top_p=SAMPLING.top_p,
        min_p=SAMPLING.min_p,
        temp=SAMPLING.temperature,
        repeat_penalty=SAMPLING.repeat_penalty,
        reset=True,
    )
    for _ in stream:
        count += 1
        if count == 1:
            first = time.perf_counter()
            timer.start()
        if count == tokens:
            break
    end = time.perf_counter()
    timer.active = False
    stream.close()
    return DecodeRun(count - 1, end - first, timer.seconds)


def cancel_latency(engine: LlamaEngine, prompt: str, during: str, delay_s: float) -> float:
    """Milliseconds from ``cancel.set()`` to ``generate`` returning on the engine's thread."""
    cancel = threading.Event()
    done = threading.Event()
    session_box: list[LlamaSession] = []
    started = threading.Event()

    def work() -> None:
        try:
            session = engine.new_session(prompt)
            session_box.append(session)
            started.set()
            for _ in session.generate(100_000, SAMPLING, cancel):
                pass
        finally:
            started.set()
            done.set()

    worker = threading.Thread(target=work)
    worker.start()
    started.wait()
    if during == "decode":
        while not done.is_set() and session_box[0].stats.completion_tokens < 3:
            time.sleep(0.005)
    time.sleep(delay_s)
    set_at = time.perf_counter()
    cancel.set()
    done.wait()
    latency = (time.perf_counter() - set_at) * 1000
    worker.join()
    return round(latency, 1)


# -- busy computer: threads x wait policy x background load -------------------------------------

# Wait policies compared by ``--policy-sweep`` (each in a fresh process: libgomp reads them once).
POLICIES: dict[str, dict[str, str]] = {
    "openmp-default": {},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "spincount-0": {"GOMP_SPINCOUNT": "0"},
    "spincount-1k": {"GOMP_SPINCOUNT": "1000"},
    "spincount-3k": {"GOMP_SPINCOUNT": "3000"},
    "spincount-10k": {"GOMP_SPINCOUNT": "10000"},
    "spincount-30k": {"GOMP_SPINCOUNT": "30000"},
    "spincount-100k": {"GOMP_SPINCOUNT": "100000"},
}
# Imports llama_cpp only, so the engine module's own policy defaults stay out of the comparison.
PROBE = Path(__file__).with_name("decode_probe.py")


def _busy() -> subprocess.Popen[bytes]:
    """A background process keeping one core busy (a browser tab, an IDE indexing)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def policy_sweep(path: Path, cores: int, loads: tuple[int, ...] = (0, 1, 2)) -> dict[str, Any]:
    """Every (policy, threads) under 0, 1 and 2 busy background processes, each in a fresh process.

    Load levels are the outer loop and policies are interleaved inside it, so a change in what
    the other users of the machine do hits all settings of a level alike.
    """
    results: dict[str, Any] = {}
    for load in loads:
        hogs = [_busy() for _ in range(load)]
        try:
            time.sleep(0.5)
            for name, env in POLICIES.items():
                for threads in range(1, cores + 1):
                    child_env = {
                        k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
                    }
                    child_env.update(env)
                    out = subprocess.run(
                        [sys.executable, str(PROBE), str(path), str(threads)],
                        env=child_env, capture_output=True, text=True, check=True, timeout=300,
                    )  # fmt: skip
                    figures = json.loads(out.stdout.strip().splitlines()[-1])
                    results.setdefault(f"{name}/t{threads}", {})[f"load{load}"] = figures
                    print(f"load {load} {name:15s} threads {threads}: {figures}", flush=True)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    return results


def summarize_sweep(results: dict[str, Any]) -> dict[str, Any]:
    """Idle decode vs the best idle setting, and decode under one busy process vs its own idle."""
    best_idle = max(r["load0"]["decode_tok_s"] for r in results.values())
    summary: dict[str, Any] = {}
    for key, r in results.items():
        idle = r["load0"]["decode_tok_s"]
        entry = {"idle_ratio_vs_best": round(idle / best_idle, 3)}
        for load in ("load1", "load2"):
            if load in r:
                entry[f"decode_{load}_ratio"] = round(r[load]["decode_tok_s"] / idle, 3)
        summary[key] = entry
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small qwen35 shape, fewer tokens (< 1 minute)")
    parser.add_argument("--threads", type=int, default=None, help="default: physical cores")
    parser.add_argument("--model", type=Path, default=None, help="measure this GGUF instead")
    parser.add_argument(
        "--busy-only", action="store_true", help="only decode idle vs under load, and vs the best setting"
    )
    parser.add_argument(
        "--policy-sweep",
        action="store_true",
        help="threads x wait policy x background load (several minutes)",
    )
    args = parser.parse_args()
    if args.policy_sweep:
        path, label = benchmark_model(args.quick, args.model)
        results = policy_sweep(path, physical_cores())
        print(
            json.dumps(
                {"model": label, "sweep": results, "summary": summarize_sweep(results)}, sort_keys=True
            )
        )
        return 0

    threads = args.threads or physical_cores()
    path, label = benchmark_model(args.quick, args.model)
    n_ctx = 4096 if args.quick else 16384
    figures: dict[str, Any] = {
        "quick": args.quick,
        "model": label,
        "file_bytes": path.stat().st_size,
        "threads": threads,
        "n_ctx": n_ctx,
        "n_ubatch": 128,
        "tokens_per_turn": 8 if args.quick else 32,
    }

    # threads=None is the app's "Automatic": one per core, adapted by the governor while decoding.
    engine = LlamaEngine(path, n_ctx=n_ctx, n_threads=args.threads, n_ubatch=128, n_batch=512)
    started = time.perf_counter()
    info = engine.load()
    figures["load_s"] = round(time.perf_counter() - started, 2)
    figures["resident_bytes"] = info.resident_bytes
    figures["weights_bytes"] = engine.model.weights_bytes
    print(f"{label}: {path.stat().st_size / 2**20:.0f} MiB, {threads} threads, {engine.describe()}")

    short = system_prompt(1) + user_turn(0, 1)
    pairs, decode_tokens = (6, 64) if args.quick else (4, 48)
    timer = DecodeTimer()
    if args.busy_only:
        decode_vs_bare(engine, bare_llama(path, n_ctx, threads), figures, short, pairs, decode_tokens, timer)
    else:
        speed_and_cancel(args.quick, engine, path, figures, short, pairs, decode_tokens, timer)
    busy_computer(engine, path, figures, short, decode_tokens, timer)
    print(json.dumps(figures, sort_keys=True))
    return 0


def speed_and_cancel(
    quick: bool,
    engine: LlamaEngine,
    path: Path,
    figures: dict[str, Any],
    short: str,
    pairs: int,
    decode_tokens: int,
    timer: DecodeTimer,
) -> None:
    """Episode cache reuse, the naive loop, decode vs bare llama.cpp, and cancel latency."""
    turns = 7
    # The synthetic vocabulary has few merges (about one token per character), so these texts
    # give realistic token counts: a ~1.3k-token system prompt and ~300-token tool results.
    paragraphs, rows, tokens = (1, 1, 8) if quick else (4, 4, 32)
    n_ctx, threads = figures["n_ctx"], figures["threads"]
    episode = engine_episode(engine, turns, paragraphs, rows, tokens)
    episode.pop("prompt_text")
    figures["episode"] = episode
    figures["prefill_tok_s"] = episode["prefill_tok_s"]
    figures["decode_tok_s"] = episode["decode_tok_s"]
    print(f"engine episode: {json.dumps(episode)}")

    llm = bare_llama(path, n_ctx, threads)
    naive = naive_episode(llm, turns, paragraphs, rows, tokens)
    figures["naive"] = naive
    print(f"naive create_completion loop: {json.dumps(naive)}")
    decode_vs_bare(engine, llm, figures, short, pairs, decode_tokens, timer)

    long_prompt = system_prompt(8 if quick else 12)
    decode_ms = [cancel_latency(engine, short, "decode", 0.0) for _ in range(3)]
    prefill_ms = [cancel_latency(engine, long_prompt, "prefill", 0.3) for _ in range(3)]
    figures["cancel_ms"] = {"decode": decode_ms, "prefill": prefill_ms, "max": max(decode_ms + prefill_ms)}
    figures["aborted_prefill_chunks"] = engine.counters.aborted_chunks
    print(f"cancel latency ms: {figures['cancel_ms']}")


def bare_llama(path: Path, n_ctx: int, threads: int) -> Any:
    """llama-cpp-python on its own, every thread fixed (no governor)."""
    import llama_cpp

    from sqale_desktop.core.engines.llama.backends import load_backends

    load_backends()  # the app's build has dynamic backends: register them first

    return llama_cpp.Llama(
        str(path), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, n_ubatch=128, n_batch=512,
        verbose=False,
    )  # fmt: skip


def decode_vs_bare(
    engine: LlamaEngine,
    llm: Any,
    figures: dict[str, Any],
    short: str,
    pairs: int,
    decode_tokens: int,
    timer: DecodeTimer,
) -> None:
    """The engine's decode rate over bare ``Llama.generate``, interleaved; closes ``llm``."""
    # Interleaved pairs, best of each: the machine may be busy, and load only ever slows a run.
    mine: list[DecodeRun] = []
    bare: list[DecodeRun] = []
    for _ in range(pairs):
        bare.append(bare_decode_run(llm, short, decode_tokens, timer))
        mine.append(engine_decode_run(engine, short, decode_tokens, timer))
    llm.close()
    figures["decode_engine_tok_s"] = [round(r.rate, 2) for r in mine]
    figures["decode_bare_generate_tok_s"] = [round(r.rate, 2) for r in bare]
    figures["decode_ratio_vs_bare_generate"] = round(max(r.rate for r in mine) / max(r.rate for r in bare), 4)
    # Same llama_decode for both: the ratio implied by the per-token work outside it.
    per_token_ms = min(r.decode_seconds / r.tokens for r in mine + bare) * 1000
    engine_over = statistics.median(r.overhead_ms for r in mine)
    bare_over = statistics.median(r.overhead_ms for r in bare)
    figures["decode_ms_per_token"] = round(per_token_ms, 3)
    figures["outside_decode_ms_per_token"] = {"engine": round(engine_over, 3), "bare": round(bare_over, 3)}
    figures["decode_ratio_from_overhead"] = round(
        (per_token_ms + bare_over) / (per_token_ms + engine_over), 4
    )
    print(
        "decode tok/s: engine", figures["decode_engine_tok_s"], "bare", figures["decode_bare_generate_tok_s"]
    )
    print(f"llama_decode {per_token_ms:.2f} ms/tok; outside: engine {engine_over:.3f} bare {bare_over:.3f}")


def busy_computer(
    engine: LlamaEngine,
    path: Path,
    figures: dict[str, Any],
    short: str,
    decode_tokens: int,
    timer: DecodeTimer,
) -> None:
    """Decode idle and under one busy process (the engine's own policy), then vs the best idle setting."""
    # A busy computer: the engine's own policy, idle and with one busy background process.
    figures["wait_policy"] = thread_policy.effective()
    idle_runs, loaded_runs, loaded_threads = [], [], []
    for _ in range(2):
        idle_runs.append(engine_decode_run(engine, short, decode_tokens, timer).rate)
        hog = _busy()
        try:
            time.sleep(0.3)
            loaded_runs.append(engine_decode_run(engine, short, decode_tokens, timer).rate)
            loaded_threads.append(engine.memory.decode_threads)
        finally:
            hog.kill()
            hog.wait()
    figures["decode_idle_tok_s"] = [round(r, 2) for r in idle_runs]
    figures["decode_loaded_tok_s"] = [round(r, 2) for r in loaded_runs]
    figures["decode_loaded_ratio"] = round(statistics.median(loaded_runs) / statistics.median(idle_runs), 3)
    figures["decode_loaded_threads"] = loaded_threads
    governor = engine.memory.governor
    figures["governor"] = (
        None if governor is None else {"trials": governor.trials, "switches": governor.switches}
    )
    print(
        f"decode under one busy process / idle: {figures['decode_loaded_ratio']} (threads {loaded_threads})"
    )
    engine.close()
    # Idle decode of the engine's setting (its wait policy, one thread per core) vs the best of the sweep.
    sweep = policy_sweep(path, physical_cores(), loads=(0,))
    chosen = sweep[f"{engine_policy_name()}/t{physical_cores()}"]["load0"]["decode_tok_s"]
    best = max(r["load0"]["decode_tok_s"] for r in sweep.values())
    figures["idle_sweep_decode_tok_s"] = {k: r["load0"]["decode_tok_s"] for k, r in sweep.items()}
    figures["idle_decode_ratio_vs_best"] = round(chosen / best, 3)


def engine_policy_name() -> str:
    """The sweep's name for the wait policy the engine sets (``thread_policy.WAIT_POLICY``)."""
    return next(name for name, env in POLICIES.items() if env == thread_policy.WAIT_POLICY)


if __name__ == "__main__":
    sys.exit(main())
