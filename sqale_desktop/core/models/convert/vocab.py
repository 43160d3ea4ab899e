"""Tokenizer metadata as llama.cpp reads it, from ``tokenizer.json`` without transformers.

llama.cpp's converter loads the tokenizer through transformers and recognises the pre-tokenizer
by hashing the ids of a probe text.  Here the pre-tokenizer is recognised from the regex in
``tokenizer.json`` itself, which is what the hash stands for; a regex llama.cpp has no
implementation for is refused rather than guessed.  Merges, special token ids and the chat
template are written by gguf's own ``SpecialVocab``, which reads the same JSON files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf

from sqale_desktop.core.models.convert.errors import UnsupportedCheckpoint

# The Split regexes of Qwen tokenizers, as llama-vocab.cpp quotes them for each pre-tokenizer.
_QWEN35_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
PRE_TOKENIZERS = {_QWEN35_REGEX: "qwen35", _QWEN2_REGEX: "qwen2"}


@dataclass(frozen=True)
class Vocab:
    tokens: list[str]
    token_types: list[int]
    pre: str


def read_vocab(folder: Path, vocab_size: int) -> Vocab:
    """Tokens padded to the model's vocabulary size, with llama.cpp token types."""
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise UnsupportedCheckpoint(f"{folder} has no tokenizer.json")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    model = data.get("model") or {}
    if model.get("type") != "BPE":
        raise UnsupportedCheckpoint("only byte-level BPE tokenizers are supported")
    by_id: dict[int, str] = {int(i): tok for tok, i in model["vocab"].items()}
    added: dict[int, tuple[str, bool]] = {
        int(t["id"]): (t["content"], bool(t.get("special", False))) for t in data.get("added_tokens", [])
    }
    by_id.update({i: content for i, (content, _) in added.items()})
    if by_id and max(by_id) >= vocab_size:
        raise UnsupportedCheckpoint(
            f"the tokenizer has ids up to {max(by_id)} but the model only {vocab_size}"
        )
    tokens: list[str] = []
    types: list[int] = []
    for i in range(vocab_size):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(int(gguf.TokenType.UNUSED))
        elif i in added:
            content, special = added[i]
            tokens.append(content)
            # llama.cpp's converter: special, or looking like <|...|>, means control.
            control = special or (content.startswith("<|") and content.endswith("|>"))
            types.append(int(gguf.TokenType.CONTROL if control else gguf.TokenType.USER_DEFINED))
        else:
            tokens.append(by_id[i])
            types.append(int(gguf.TokenType.NORMAL))
    return Vocab(tokens, types, _pre_tokenizer(data))


def _pre_tokenizer(data: dict[str, Any]) -> str:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "Split" and isinstance(node.get("pattern"), dict):
                regex = node["pattern"].get("Regex")
                if isinstance(regex, str):
                    found.append(regex)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data.get("pre_tokenizer"))
    for regex in found:
        if regex in PRE_TOKENIZERS:
            return PRE_TOKENIZERS[regex]
    raise UnsupportedCheckpoint("the tokenizer's pre-tokenizer is not one llama.cpp implements for Qwen")


def write_vocab(writer: gguf.GGUFWriter, folder: Path, vocab_size: int) -> Vocab:
    """Add the tokenizer, merges, special ids and chat template to ``writer``."""
    vocab = read_vocab(folder, vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(vocab.pre)
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.token_types)
    special = gguf.SpecialVocab(folder, load_merges=True, n_vocab=vocab_size)
    if not special.merges:
        raise UnsupportedCheckpoint("tokenizer.json has no BPE merges")
    special.add_to_gguf(writer, quiet=True)
    return vocab


def write_generation_config(writer: gguf.GGUFWriter, folder: Path) -> None:
    """Carry the recommended sampling settings (``generation_config.json``) into the GGUF."""
    path = folder / "generation_config.json"
    if not path.is_file():
        return
    config: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(config.get("temperature"), int | float):
        writer.add_sampling_temp(float(config["temperature"]))
    if isinstance(config.get("top_p"), int | float):
        writer.add_sampling_top_p(float(config["top_p"]))
    if isinstance(config.get("top_k"), int):
        writer.add_sampling_top_k(int(config["top_k"]))
    if isinstance(config.get("min_p"), int | float):
        writer.add_sampling_min_p(float(config["min_p"]))
