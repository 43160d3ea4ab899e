"""Check that a finished GGUF loads in the bundled llama.cpp and generates, before registering it.

Runs in a child process for the same reason as quantization: a model that crashes llama.cpp must
fail the conversion, not the app.  The child prints one JSON line with what it saw.

The child runs ``child_main([GGUF, N_TOKENS])`` (started as ``sqale-desktop --child-module
sqale_desktop.core.models.convert.verify ...``, see ``child.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqale_desktop.core.models.convert.child import child_command, child_env
from sqale_desktop.core.models.convert.errors import VerificationFailed

PROBE_PROMPT = "<|im_start|>user\nList the tables.<|im_end|>\n<|im_start|>assistant\n"


@dataclass(frozen=True)
class VerifyReport:
    """What the check saw: generated token ids, vocabulary size and tensor-free metadata."""

    generated: list[int]
    n_vocab: int
    architecture: str


def verify_gguf(path: Path, n_tokens: int = 4, timeout_s: float = 600.0) -> VerifyReport:
    """Load ``path``, generate ``n_tokens`` greedily; raise VerificationFailed otherwise."""
    cmd = child_command(__name__, str(path), str(n_tokens))
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=timeout_s, check=False, env=child_env())
    except subprocess.TimeoutExpired as exc:
        raise VerificationFailed("the converted model did not finish a test generation in time") from exc
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise VerificationFailed(
            f"the converted model does not load or generate ({'; '.join(err) or done.returncode})"
        )
    result = json.loads(lines[-1])
    report = VerifyReport(list(result["generated"]), int(result["n_vocab"]), str(result["architecture"]))
    if len(report.generated) != n_tokens or any(not 0 <= t < report.n_vocab for t in report.generated):
        raise VerificationFailed(
            f"the converted model generated {report.generated}, expected {n_tokens} tokens"
        )
    return report


def _run(path: str, n_tokens: int) -> dict[str, object]:
    import llama_cpp

    from sqale_desktop.core.engines.llama.backends import load_backends

    load_backends()  # a dynamic-backend build registers its CPU kernels here

    llm = llama_cpp.Llama(path, n_ctx=256, n_batch=64, n_threads=1, verbose=False, seed=0)
    prompt = llm.tokenize(PROBE_PROMPT.encode(), add_bos=False, special=True)
    generated: list[int] = []
    # top_k=1 is greedy; EOG is not a stop here, so a random-weight model still yields n tokens.
    for token in llm.generate(prompt, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0):
        generated.append(int(token))
        if len(generated) >= n_tokens:
            break
    return {
        "generated": generated,
        "n_vocab": llm.n_vocab(),
        "architecture": llm.metadata.get("general.architecture", ""),
    }


def child_main(argv: Sequence[str]) -> int:
    """The child process: load, generate, print the report as one JSON line."""
    print(json.dumps(_run(argv[0], int(argv[1]) if len(argv) > 1 else 4)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
