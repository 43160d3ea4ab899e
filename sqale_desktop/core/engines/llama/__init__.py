"""The in-process llama.cpp engine: a GGUF loaded once, episodes kept as token ids.

Why token level: re-tokenizing sampled text does not always give the sampled ids back, and
Qwen3.5 is a hybrid model whose recurrent state llama.cpp cannot roll back, so any mismatch
between the prompt and what is already evaluated costs a full re-evaluation (minutes at 12k
tokens).  A session therefore holds the exact ids: the sampled ones (end-of-turn token included)
and each appended text tokenized on its own.  Before sampling, the engine evaluates only what
its memory lacks; ``EngineStats.evaluated_tokens`` counts every token the model actually ran.

The modules, in the order a newcomer reads them:

- ``engine``: ``LlamaEngine``, the ``base.Engine`` protocol and the one-owner-thread rule;
- ``loading``: offload plan, load attempts, notes, vocabulary and special ids, the rollback
  method: one frozen ``LoadedModel``;
- ``memory``: what the context holds token for token; decode, snapshot/restore, chunked and
  cancellable prefill, the system-prompt cache, checkpoints;
- ``session``: ``LlamaSession``, one episode as ids (sees the engine through a Protocol);
- ``speculation``: prompt-lookup drafting, one-pass verification and rollback, built only when
  speculation is on (measurements: ``benchmarks/speculative.py``);
- ``offload``: the devices llama.cpp can offload to, the layer plan from the GGUF header, the
  buffers loading really allocated; ``gpu``: what the faces show of it (through ``core.runtime``);
- ``prefix_store``: the evaluated system turn (and finished threads) saved on disk;
- ``native_log``: llama.cpp's log lines into Python logging, not the terminal;
- helpers: ``speculative`` (exact acceptance), ``ngram_draft``, ``llama_sampler`` (vLLM's order),
  ``thread_policy`` and ``thread_governor`` (OpenMP waits, threads under load), ``cpu_info``.

Nothing in the package imports ``llama_cpp`` at the top: ``engine`` sets the OpenMP wait
policy first.
"""
