"""What the llama engine tests share besides fixtures: the engine's test settings, prompts, a turn
runner, a cancel in a chunk."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.engines.llama.session import LlamaSession

SYSTEM = "<|im_start|>system\nYou answer questions about a SQLite database by calling tools.<|im_end|>\n"
GREEDY = SamplingParams(temperature=0.0, top_k=1, top_p=1.0, seed=0)
# The engine's settings in tests.  One thread: ggml's worker threads spin-wait on each other, and
# on a CI box already busy with other tests two threads can run many times slower than one.
# Batches of 64 tokens: a prompt is evaluated in several chunks, so a cancel can land between
# them or inside one (CancelInChunk); 4,096 tokens of context hold an episode and its follow-up.
SMALL: dict[str, Any] = {"n_ctx": 4096, "n_batch": 64, "n_ubatch": 64, "n_threads": 1}


def small_engine(path: Path, **overrides: Any) -> LlamaEngine:
    """A loaded engine with the tests' settings (:data:`SMALL`, then ``overrides``)."""
    engine = LlamaEngine(path, **{**SMALL, **overrides})
    engine.load()
    return engine


def user_turn(text: str) -> str:
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n<think>\n"


class CancelInChunk(threading.Event):
    """Reads as set once ``chunks`` prefill chunks are in memory and the next chunk has started.

    The engine checks the flag once between chunks, and llama.cpp's abort callback checks it
    while a chunk is computed: answering False to the between-chunks check and True afterwards
    lands the cancel inside a running chunk, reproducibly and without timing.
    """

    def __init__(self, engine: LlamaEngine, chunks: int) -> None:
        super().__init__()
        self.engine = engine
        self.target = len(engine.evaluated_tokens) + chunks * engine.n_batch
        self.checks_after_target = 0

    def is_set(self) -> bool:
        if len(self.engine.evaluated_tokens) >= self.target:
            self.checks_after_target += 1
        return self.checks_after_target >= 2 or super().is_set()


def evaluated(session: LlamaSession) -> int:
    """Tokens that went through the model for this session, or came from the system-prompt cache."""
    return session.stats.evaluated_tokens + session.reused_tokens


def run(
    session: LlamaSession, max_tokens: int, sampling: SamplingParams, cancel: threading.Event | None = None
) -> str:
    return "".join(session.generate(max_tokens, sampling, cancel or threading.Event()))


def long_turn_pending(engine: LlamaEngine) -> LlamaSession:
    """A session after one short turn, with a long user turn appended and not yet evaluated."""
    session = engine.new_session(SYSTEM)
    session.append(user_turn("hi"))
    run(session, 4, GREEDY)
    session.end_turn()
    session.append(user_turn("the cat sat on the mat " * 40))
    return session
