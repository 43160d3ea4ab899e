"""The built-in protocol strings, template filling, and loading from a model folder."""

from __future__ import annotations

import json
from pathlib import Path

from sqale_desktop.core.agent.protocol import AgentProtocol, fill_template, load_protocol
from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.tools.specs import TOOL_SPECS


def test_builtin_system_prompt_lists_every_tool_with_its_arguments_and_a_plan() -> None:
    prompt = AgentProtocol().system_prompt
    for spec in TOOL_SPECS:
        signature = spec.name + (f"({', '.join(a.name for a in spec.args)})" if spec.args else "")
        assert signature in prompt
        assert f'{{"tool": "{spec.name}", "args": {{' in prompt
    assert "Execution plan" in prompt
    assert "no code fences" in prompt


def test_user_turn_says_the_schema_is_not_shown_and_gives_the_question() -> None:
    text = AgentProtocol().user_text("How many albums has AC/DC {sic}?")
    assert "schema is not shown" in text
    assert text.endswith("How many albums has AC/DC {sic}?")


def test_prompt_head_is_chatml_system_then_user() -> None:
    head = AgentProtocol().prompt_head("Q?")
    assert head.startswith("<|im_start|>system\n")
    assert head.count("<|im_start|>") == 2
    assert head.endswith("Q?<|im_end|>\n")
    assert "<|im_end|>\n<|im_start|>user\n" in head


def test_budget_line_and_exploration_limit_as_in_the_replayed_episodes() -> None:
    protocol = AgentProtocol()
    assert protocol.budget_line(4) == "[4 tool turns left before you must answer]"
    assert protocol.budget_line(1) == "[1 tool turn left before you must answer]"
    with_query = protocol.exploration_limit_message("SELECT 1")
    assert with_query.startswith("You have reached the exploration limit.")
    assert "executed without error was:\nSELECT 1\nIf you are not sure" in with_query
    assert protocol.exploration_limit_message(None).endswith("Return only the SQL query.")


def test_defaults_match_the_model_card() -> None:
    protocol = AgentProtocol()
    assert (protocol.tool_turns, protocol.max_query_errors) == (6, 4)
    assert (protocol.tool_turn_tokens, protocol.final_turn_tokens, protocol.episode_tokens) == (
        2048,
        3072,
        12288,
    )
    assert protocol.context_tokens == 16384
    assert protocol.sampling == SamplingParams(temperature=0.6, top_p=0.95, top_k=20, min_p=0.0)
    assert protocol.stop == ("<|im_end|>", "<|endoftext|>")
    assert protocol.prompt_source == "builtin"


def test_fill_template_handles_any_placeholder_name() -> None:
    assert fill_template("Q: {question}", "x", prefer="question") == "Q: x"
    assert fill_template("Q: {q}", "x", prefer="question") == "Q: x"
    assert fill_template("Q: {}", "x", prefer="question") == "Q: x"
    assert fill_template("Q: {question} E: {evidence}", "x", prefer="question") == "Q: x E: "
    assert fill_template("no field, {{braces}}", "x", prefer="question") == "no field, {braces}"
    assert fill_template("broken {", "x", prefer="question") == "broken {"


def test_load_protocol_without_a_folder_or_files_is_builtin(tmp_path: Path) -> None:
    assert load_protocol(None) == AgentProtocol()
    protocol = load_protocol(tmp_path)
    assert protocol.prompt_source == "builtin"
    assert protocol.notes == ()


def test_generation_config_sets_sampling(tmp_path: Path) -> None:
    (tmp_path / "generation_config.json").write_text(
        json.dumps({"temperature": 0.7, "top_p": 0.8, "top_k": 40, "do_sample": True, "bos_token_id": 1})
    )
    protocol = load_protocol(tmp_path)
    assert protocol.sampling == SamplingParams(temperature=0.7, top_p=0.8, top_k=40)
    assert protocol.sampling_source.startswith("generation_config.json:")


def test_broken_generation_config_keeps_defaults_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "generation_config.json").write_text("{not json")
    protocol = load_protocol(tmp_path)
    assert protocol.sampling == SamplingParams()
    assert any("generation_config.json" in note for note in protocol.notes)
