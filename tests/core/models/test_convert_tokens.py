"""Token ids: llama.cpp on the converted GGUF must match the checkpoint's own tokenizer.

The GGUF is written vocab-only-sized (the tiny model) and loaded with ``vocab_only`` so the
comparison is quick; both ways Qwen tokenizers mark ``<think>`` (special or plain added token)
are covered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sqale_desktop.core.models.convert.checkpoint import Checkpoint
from sqale_desktop.core.models.convert.hparams import read_hparams
from sqale_desktop.core.models.convert.layout import plan_tensors
from sqale_desktop.core.models.convert.tiny_checkpoint import write_tiny_checkpoint
from sqale_desktop.core.models.convert.writer import write_gguf

STRINGS = [
    "<|im_start|>system\nYou are a text-to-SQL agent.<|im_end|>\n"
    "<|im_start|>user\nHow many tracks?<|im_end|>\n<|im_start|>assistant\n",
    "<think>\nI should list the tables first.\n</think>\n\n",
    '<think>\n\n</think>{"tool": "run_query", "args": {"sql": "SELECT COUNT(*) FROM tracks;"}}<|im_end|>',
    "SELECT c.name, SUM(i.total) AS revenue FROM customers c JOIN invoices i ON i.customer_id = c.id\n"
    "WHERE i.date >= '2024-01-01' GROUP BY c.name ORDER BY revenue DESC LIMIT 10;",
    'Tool result: [("Ñandú", 3), ("東京", 12), ("Zoë", None)]\n[4 tool turns left before you must answer]',
    "Größe café naïve русский Ελληνικά 🙂🚀 tabs\tand  double  spaces\r\n\n\n   trailing   ",
    "it's they're we've I'm you'll he'd DON'T 12345 3.14159 1,000,000",
    "<|endoftext|><|im_end|><|im_start|>",
    "",
]


@pytest.fixture(scope="module", params=[True, False], ids=["think-special", "think-added"])
def converted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tok") / "tiny"
    write_tiny_checkpoint(folder, with_mtp=False, think_special=request.param)
    ckpt = Checkpoint(folder)
    hp = read_hparams(ckpt.config)
    out = folder.parent / "tiny.gguf"
    write_gguf(ckpt, hp, plan_tensors(ckpt, hp), out, name="tiny")
    return folder, out


def test_llama_cpp_token_ids_equal_the_checkpoint_tokenizer(converted: tuple[Path, Path]) -> None:
    import llama_cpp
    from tokenizers import Tokenizer

    folder, gguf_path = converted
    reference = Tokenizer.from_file(str(folder / "tokenizer.json"))
    llm = llama_cpp.Llama(str(gguf_path), vocab_only=True, verbose=False)
    for text in STRINGS:
        expected = reference.encode(text, add_special_tokens=False).ids
        got = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        assert got == expected, text
        assert llm.detokenize(got, special=True).decode("utf-8") == text


def test_chatml_and_think_markers_are_single_tokens_and_end_of_turn_is_eog(
    converted: tuple[Path, Path],
) -> None:
    import llama_cpp
    from tokenizers import Tokenizer

    folder, gguf_path = converted
    reference = Tokenizer.from_file(str(folder / "tokenizer.json"))
    llm = llama_cpp.Llama(str(gguf_path), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    for marker in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"):
        ids = llm.tokenize(marker.encode(), add_bos=False, special=True)
        assert ids == [reference.token_to_id(marker)], marker
    eog = {
        m
        for m in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>")
        if llama_cpp.llama_vocab_is_eog(vocab, reference.token_to_id(m))
    }
    assert eog == {"<|im_end|>", "<|endoftext|>"}
    assert llm.metadata["tokenizer.ggml.add_bos_token"] == "false"
