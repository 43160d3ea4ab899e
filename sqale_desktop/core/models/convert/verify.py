"""Check that a finished GGUF loads in the bundled llama.cpp and generates, before registering it.

Runs in a child process for the same reason as quantization: a model that crashes llama.cpp must
fail the conversion, not the app.  The child (``core.child``) answers with what it saw.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqale_desktop.core import child
from sqale_desktop.core.models.convert.errors import VerificationFailed

PROBE_PROMPT = "<|im_start|>user\nList the tables.<|im_end|>\n<|im_start|>assistant\n"


@dataclass(frozen=True)
class VerifyReport:
    """What the check saw: generated token ids, vocabulary size and tensor-free metadata."""

    generated: list[int]
    n_vocab: int
    architecture: str


def verify_gguf(path: Path, n_tokens: int = 4, timeout_s: float = 600.0) -> VerifyReport:
    """Load ``path``, generate ``n_tokens`` greedily; raise VerificationFailed otherwise.

    No memory cap: llama.cpp maps the whole model, which an address-space cap would count."""
    plan = {"path": str(path), "n_tokens": n_tokens}
    try:
        done = child.run(__name__, plan, what="the test generation", total_s=timeout_s, memory_mb=None)
    except child.ChildTimedOut as exc:
        raise VerificationFailed("the converted model did not finish a test generation in time") from exc
    except (child.ChildDied, child.ChildFailed) as exc:
        raise VerificationFailed(f"the converted model does not load or generate ({exc})") from None
    result = done.data
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
    """The child process (plan on stdin): load, generate, answer with the report."""
    del argv
    return child.serve(lambda plan, _endpoint: _run(str(plan["path"]), int(plan.get("n_tokens", 4))))


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
