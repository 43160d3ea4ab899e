"""The assistant-turn opener, derived from the model's own chat template.

Thinking stays enabled.  Qwen3's thinking models (Qwen3-2507 Thinking, Qwen3.5) open every
assistant turn with ``<|im_start|>assistant\\n<think>\\n`` when thinking is on, and write
``<think>\\n\\n</think>\\n\\n`` only when it is switched off; the original Qwen3 and plain ChatML
models (SmolLM2) open with ``<|im_start|>assistant\\n`` and let the model write ``<think>`` itself.
Rather than guess which family a GGUF belongs to, the template is rendered (in Jinja's sandbox,
as transformers and llama.cpp do) with ``add_generation_prompt=True, enable_thinking=True`` and
the text after the last ``<|im_start|>assistant`` is the opener.  An empty think block that a
template emits anyway is dropped, because it would switch thinking off.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Any

ASSISTANT_START = "<|im_start|>assistant"
PLAIN_OPENER = "<|im_start|>assistant\n"
THINKING_OPENER = "<|im_start|>assistant\n<think>\n"
# Without a template (replay, HTTP servers), assume the model is the Qwen3.5 thinking model this
# app is for.
DEFAULT_OPENER = THINKING_OPENER

_EMPTY_THINK = re.compile(r"<think>\s*</think>\s*$")
_log = logging.getLogger(__name__)


def assistant_opener(chat_template: str | None) -> str:
    """The text that opens every assistant turn, for the given chat template (``None``: the default)."""
    if not chat_template:
        return DEFAULT_OPENER
    rendered = _render(chat_template)
    if rendered is None or ASSISTANT_START not in rendered:
        return _guess(chat_template)
    opener = rendered[rendered.rindex(ASSISTANT_START) :]
    if _EMPTY_THINK.search(opener):
        opener = _EMPTY_THINK.sub("", opener)
    if not opener.startswith(PLAIN_OPENER):
        opener = PLAIN_OPENER + opener[len(ASSISTANT_START) :].lstrip("\n")
    return opener


def opener_starts_thinking(opener: str) -> bool:
    """Whether a completion after this opener begins inside the think block."""
    return opener.rstrip().endswith("<think>")


def _render(chat_template: str) -> str | None:
    try:
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:  # jinja2 comes with llama-cpp-python; without it, fall back to guessing
        return None

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def strftime_now(format: str) -> str:
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    # the helpers transformers gives templates; some model templates call them
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
    ]
    try:
        template = env.from_string(chat_template)
        rendered: str = template.render(
            messages=messages,
            add_generation_prompt=True,
            enable_thinking=True,
            tools=None,
            bos_token="",
            eos_token="",
        )
    except Exception as exc:  # any template error: the caller falls back to a textual guess
        _log.info("chat template could not be rendered (%s); guessing the assistant opener", exc)
        return None
    return rendered


def _guess(chat_template: str) -> str:
    if "<|im_start|>" not in chat_template:
        return DEFAULT_OPENER
    if re.search(r"""['"]<think>\\n['"]""", chat_template):
        return THINKING_OPENER
    return PLAIN_OPENER
