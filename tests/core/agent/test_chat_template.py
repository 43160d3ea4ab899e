"""The assistant opener follows the model's own chat template."""

from __future__ import annotations

import gguf

from sqale_desktop.core.agent.chat_template import (
    DEFAULT_OPENER,
    PLAIN_OPENER,
    THINKING_OPENER,
    assistant_opener,
    opener_starts_thinking,
)
from tests.helpers import smollm2_gguf

_MESSAGES = """\
{%- for message in messages %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- endfor %}
"""

# The generation-prompt block of Qwen3.5 / Qwen3-2507 thinking models: <think> opens the turn.
QWEN35_STYLE = (
    _MESSAGES
    + """{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- else %}
        {{- '<think>\\n' }}
    {%- endif %}
{%- endif %}"""
)

# The original Qwen3 block: only a disabled-thinking turn gets (an empty) think block.
QWEN3_STYLE = (
    _MESSAGES
    + """{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""
)

ALWAYS_EMPTY_THINK = (
    _MESSAGES + "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n\n</think>\n\n{% endif %}"
)


def test_qwen35_style_template_opens_with_think() -> None:
    assert assistant_opener(QWEN35_STYLE) == THINKING_OPENER
    assert opener_starts_thinking(THINKING_OPENER)


def test_qwen3_style_template_lets_the_model_open_its_think_block() -> None:
    assert assistant_opener(QWEN3_STYLE) == PLAIN_OPENER
    assert not opener_starts_thinking(PLAIN_OPENER)


def test_an_empty_think_block_would_switch_thinking_off_and_is_dropped() -> None:
    assert assistant_opener(ALWAYS_EMPTY_THINK) == PLAIN_OPENER


def test_no_template_means_the_qwen35_thinking_default() -> None:
    assert assistant_opener(None) == DEFAULT_OPENER == THINKING_OPENER


def test_a_template_that_cannot_render_is_read_as_text() -> None:
    broken = "{% if %}<|im_start|>assistant\\n' + '<think>\\n'"
    assert assistant_opener(broken) == THINKING_OPENER
    assert assistant_opener("{% raise_exception('no') %}<|im_start|>") == PLAIN_OPENER


def test_smollm2_gguf_template_is_plain_chatml() -> None:
    reader = gguf.GGUFReader(smollm2_gguf())
    field = reader.fields["tokenizer.chat_template"]
    template = bytes(field.parts[field.data[0]]).decode("utf-8")
    assert assistant_opener(template) == PLAIN_OPENER


def test_the_synthetic_qwen35_test_model_opens_with_think() -> None:
    from sqale_desktop.core.engines.synthetic_gguf import CHAT_TEMPLATE

    assert assistant_opener(CHAT_TEMPLATE) == THINKING_OPENER


def test_templates_may_call_strftime_now() -> None:
    template = "{{ strftime_now('%Y') }}" + QWEN35_STYLE
    assert assistant_opener(template) == THINKING_OPENER
