"""Prefill and decode rates of one GGUF, timed inside ``llama_decode``, for ``engine.py --policy-sweep``.

Imports llama_cpp and nothing of the app, so the OpenMP wait policy is exactly what this
process's environment says (the engine module would add its own defaults).

    python benchmarks/decode_probe.py MODEL.gguf THREADS
"""

from __future__ import annotations

import json
import statistics
import sys
import time

PREFILL = 128
DECODE = 24
DECODE_SECONDS = 6.0


def probe(path: str, threads: int) -> dict[str, float]:
    import llama_cpp

    from sqale_desktop.core.engines.llama.backends import load_backends

    load_backends()  # the app's build has dynamic backends: register them first

    llm = llama_cpp.Llama(
        path, n_ctx=1024, n_threads=threads, n_threads_batch=threads, n_ubatch=128, n_batch=128, verbose=False
    )
    ids = [(i * 7919) % 30000 + 100 for i in range(PREFILL)]

    def decode(tokens: list[int]) -> float:
        arr = (llama_cpp.llama_token * len(tokens))(*tokens)
        started = time.perf_counter()
        status = llama_cpp.llama_decode(llm.ctx, llama_cpp.llama_batch_get_one(arr, len(tokens)))
        assert status == 0, status
        return time.perf_counter() - started

    prefill_s = decode(ids)
    steps: list[float] = []
    begun = time.perf_counter()
    while len(steps) < DECODE and time.perf_counter() - begun < DECODE_SECONDS:
        steps.append(decode([ids[len(steps) % len(ids)]]))
    llm.close()
    return {
        "prefill_tok_s": round(PREFILL / prefill_s, 2),
        "decode_tok_s": round(1.0 / statistics.median(steps), 2),
        "decode_steps": len(steps),
    }


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1], int(sys.argv[2]))))
