"""A follow-up question against a fresh one: evaluated tokens and time to the first streamed token.

On a random-weight qwen35 GGUF (the 2B shape, Q4_K_M; ``--quick``: the small shape) with a real
BPE vocabulary (``bpe_vocab.py``: SmolLM2's by default, ``--vocab GGUF`` another's), so a
question's turn is as many tokens as with the real model, not one per character; at the token
level: the weights are random, so what is measured is what the engine evaluates and how long that
takes, never what the model says.  Every prompt is
the app's own, built by the app's code: the trained standalone prompt
(``AgentProtocol.prompt_head`` + the assistant opener) for a fresh question, and
``core.agent.followup.open_follow_up`` (the loop's own call) for a follow-up.

Steps, in one process, with the app's state store in a temporary folder:
1. load, warm the system turn (``warm_up``: evaluated, saved to the store);
2. a fresh question: two turns of ``--think`` tokens with a tool result between them, as an
   episode grows; ``first_token_s`` from opening the session to the first streamed text;
3. a follow-up on that thread (continued: the engine still holds it) and a fresh question right
   after it, each timed the same way;
4. a relaunch (a new engine on the same file, the system turn restored from the store) and a
   follow-up on the last answer's stored text: the new engine restores the thread from its saved
   state (``prefix_store``'s thread folder), or, where there is none, evaluates it again
   (``relaunch_follow_up.evaluated_over_new`` says which).
Each follow-up is measured twice: as above, and as the app asks it when the person chooses
*Follow up* on the answer (``_prefetched``): the agent thread prefetches the follow-up
(``core.agent.followup.prefetch_follow_up``: the thread and the fixed start of its turn), then a
pause stands for the typing (``--typing`` seconds), then Enter; the clock starts at Enter.
``follow_up_prefetched`` continues the fresh question asked after the first follow-up
(``fresh_after``); the relaunch is done twice, each new engine following up that same answer.

Steps 1-4 run ``--repeat`` times (default 3).  The JSON line (the last line printed): ``runs``,
one per repeat, each with ``fresh`` / ``follow_up`` / ``fresh_after`` / ``relaunch_follow_up``,
each with ``first_token_s`` (and of it ``first_prefill_s`` evaluating ``first_prefill_tokens``),
``evaluated_tokens`` and ``new_tokens`` (what the question added to its prompt, its turns
included), and for the prefetched ones ``prefetched_tokens`` and ``prefetch_s``;
``median_first_token_s`` over the runs (issue 29's targets: a follow-up with the app open <= 1.0 s,
after a relaunch <= 1.5 s on the 2B shape); ``follow_up.evaluated_over_new`` <= 1.02;
``form`` says how the follow-up was asked.

    .venv/bin/python benchmarks/followup.py [--quick] [--model GGUF | --vocab GGUF] [--repeat N]
        [--think N] [--n-ctx N] [--threads N] [--typing S]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bpe_vocab import bpe_benchmark_model  # the benchmark GGUFs, written once into the cache folder

from sqale_desktop.core.agent.chat_template import assistant_opener
from sqale_desktop.core.agent.followup import Thread, open_follow_up, prefetch_follow_up
from sqale_desktop.core.agent.protocol import AgentProtocol
from sqale_desktop.core.engines.base import EngineSession, SamplingParams
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.engines.llama.session import LlamaSession

SAMPLING = SamplingParams(temperature=0.6, top_p=0.95, top_k=20, min_p=0.0, seed=0)
TOOL_RESULT = (
    "\n<|im_start|>user\nTool result: Album, Artist, Customer, Employee, Genre, Invoice, InvoiceLine, "
    "MediaType, Playlist, PlaylistTrack, Track\n\n[5 tool turns left before you must answer]<|im_end|>\n"
)


def turn(session: EngineSession, tokens: int, started: float) -> dict[str, Any]:
    """Generate one turn; what its first streamed text waited for: the seconds from ``started``,
    and of those the prefill's seconds and tokens (the rest is opening and the first sample)."""
    first: dict[str, Any] = {"first_token_s": None}
    for _ in session.generate(tokens, SAMPLING, threading.Event()):
        if first["first_token_s"] is None:
            stats = session.stats
            first = {
                "first_token_s": round(time.perf_counter() - started, 4),
                "first_prefill_s": round(stats.prefill_seconds, 4),
                "first_prefill_tokens": stats.evaluated_tokens,
            }
    session.end_turn()
    return first


def question(
    session: EngineSession, think: int, started: float, opener: str, turns: int = 2
) -> dict[str, Any]:
    """Run ``turns`` turns on a session just opened at ``started``; its figures."""
    figures = turn(session, think, started)
    for _ in range(turns - 1):
        session.append(TOOL_RESULT + opener)
        turn(session, think, time.perf_counter())
    stats = session.stats
    return {
        **figures,
        "evaluated_tokens": stats.evaluated_tokens,
        "reused_tokens": session.reused_tokens if isinstance(session, LlamaSession) else 0,
        "prompt_tokens": stats.prompt_tokens,
    }


def fresh(
    engine: LlamaEngine, protocol: AgentProtocol, opener: str, text: str, think: int
) -> tuple[dict[str, Any], str]:
    started = time.perf_counter()
    session = engine.new_session(protocol.prompt_head(text) + opener)
    figures = question(session, think, started, opener)
    figures["new_tokens"] = figures["prompt_tokens"] - figures["reused_tokens"]
    prompt = session.prompt_text
    session.close()
    return figures, prompt


def follow_up(
    engine: LlamaEngine,
    protocol: AgentProtocol,
    opener: str,
    thread: Thread,
    text: str,
    think: int,
    typing: float | None = None,
) -> tuple[dict[str, Any], str]:
    """A follow-up timed from Enter; with ``typing`` (seconds), prefetched first as the app does
    when the person chooses Follow up, with that pause between the prefetch's start and Enter."""
    prefetch: dict[str, Any] = {}
    if typing is not None:
        chosen = time.perf_counter()
        tokens = prefetch_follow_up(engine, protocol, opener, thread, threading.Event())
        prefetch = {"prefetched_tokens": tokens, "prefetch_s": round(time.perf_counter() - chosen, 4)}
        time.sleep(max(0.0, typing - (time.perf_counter() - chosen)))
    started = time.perf_counter()
    start = open_follow_up(engine, protocol, opener, text, thread)
    figures = question(start.session, think, started, opener)
    figures.update(prefetch)
    figures["form"] = start.form
    figures["thread_tokens"] = start.thread_tokens
    figures["new_tokens"] = figures["prompt_tokens"] - start.thread_tokens
    new = figures["new_tokens"]
    figures["evaluated_over_new"] = round(figures["evaluated_tokens"] / new, 4) if new else None
    prompt = start.session.prompt_text
    start.session.close()
    return figures, prompt


def run_once(
    model: Path, n_ctx: int, threads: int | None, think: int, protocol: AgentProtocol, typing: float
) -> dict[str, Any]:
    """Steps 1-4 once, with the state store in a fresh temporary folder."""
    with tempfile.TemporaryDirectory(prefix="sqale-followup-") as home:
        os.environ["SQALE_DESKTOP_HOME"] = home  # the state store of this run only

        def launch() -> tuple[LlamaEngine, dict[str, Any]]:
            engine = LlamaEngine(model, n_ctx=n_ctx, n_threads=threads)
            started = time.perf_counter()
            engine.load()
            loaded = time.perf_counter() - started
            warm = engine.warm_up(protocol.prompt_head(""), threading.Event())
            return engine, {"load_s": round(loaded, 3), "system_turn": warm.note}

        engine, first_launch = launch()
        opener = assistant_opener(engine.chat_template())
        q1, q2, q3 = (
            "Which artists have the most albums?",
            "Only the top three?",
            "How many genres are there?",
        )
        first, prompt = fresh(engine, protocol, opener, q1, think)
        thread = Thread(prompt, (q1,), ("SELECT 1",))
        followed, _ = follow_up(engine, protocol, opener, thread, q2, think)
        after, last = fresh(engine, protocol, opener, q3, think)
        last_thread = Thread(last, (q3,), ("SELECT 1",))
        prefetched, _ = follow_up(engine, protocol, opener, last_thread, q2, think, typing)
        engine.close()
        engine, relaunch = launch()
        again, _ = follow_up(engine, protocol, opener, last_thread, q2, think)
        engine.close()
        engine, _relaunch = launch()
        again_prefetched, _ = follow_up(engine, protocol, opener, last_thread, q2, think, typing)
        engine.close()
    return {
        "launch": first_launch,
        "relaunch": relaunch,
        "fresh": first,
        "follow_up": followed,
        "fresh_after": after,
        "follow_up_prefetched": prefetched,
        "relaunch_follow_up": again,
        "relaunch_follow_up_prefetched": again_prefetched,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the small qwen35 shape, 16 tokens a turn")
    parser.add_argument("--model", type=Path, default=None, help="another GGUF to measure")
    parser.add_argument(
        "--vocab",
        type=Path,
        default=None,
        help="the GGUF whose BPE vocabulary the model gets (default SmolLM2's)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of the whole sequence (default 3)")
    parser.add_argument("--think", type=int, default=None, help="tokens generated per turn (default 64)")
    parser.add_argument("--n-ctx", type=int, default=None, help="context (default 32,768; --quick 24,576)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    parser.add_argument(
        "--typing", type=float, default=3.0, help="seconds from choosing Follow up to Enter (default 3)"
    )
    args = parser.parse_args()
    think = args.think if args.think is not None else (16 if args.quick else 64)
    n_ctx = args.n_ctx or (24_576 if args.quick else 32_768)
    model, label = (
        (args.model, args.model.name) if args.model else bpe_benchmark_model(args.quick, args.vocab)
    )
    protocol = AgentProtocol()
    runs = [
        run_once(model, n_ctx, args.threads, think, protocol, args.typing) for _ in range(max(1, args.repeat))
    ]
    medians = {
        step: statistics.median(run[step]["first_token_s"] for run in runs)
        for step in (
            "fresh",
            "follow_up",
            "fresh_after",
            "follow_up_prefetched",
            "relaunch_follow_up",
            "relaunch_follow_up_prefetched",
        )
    }
    print(
        json.dumps(
            {
                "benchmark": "followup",
                "model": label,
                "quick": args.quick,
                "n_ctx": n_ctx,
                "think_tokens_per_turn": think,
                "typing_s": args.typing,
                "median_first_token_s": medians,
                "runs": runs,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
