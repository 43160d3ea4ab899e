"""The training protocol as one object: prompt strings, budgets, sampling, and where they came from.

``load_protocol(model_dir)`` takes ``SYSTEM_PROMPT`` / ``USER_TEMPLATE`` from a ``sqale_agent.py``
next to the model (read with :mod:`ast`, never executed) and sampling from its
``generation_config.json``; whatever is missing comes from the built-in reconstruction in
:mod:`sqale_desktop.core.agent.builtin_prompt`.  The episode records ``prompt_source`` so a result
can always be traced to the exact strings that produced it.
"""

from __future__ import annotations

import json
import logging
import string
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqale_desktop.core.agent import builtin_prompt
from sqale_desktop.core.agent.sqale_agent_reader import Constant, read_constants
from sqale_desktop.core.engines.base import STOP_STRINGS, SamplingParams

AGENT_FILE = "sqale_agent.py"
GENERATION_CONFIG = "generation_config.json"
BUILTIN = "builtin"

_log = logging.getLogger(__name__)

# Integer limits a sqale_agent.py may define, under names it plausibly uses.  Only these are taken
# over; a name we do not know is recorded in ``constants`` and otherwise ignored.
_INT_NAMES: dict[str, tuple[str, ...]] = {
    "tool_turns": ("MAX_TOOL_TURNS", "TOOL_TURNS", "MAX_TURNS", "NUM_TOOL_TURNS"),
    "max_query_errors": (
        "MAX_CONSECUTIVE_ERRORS",
        "MAX_CONSECUTIVE_QUERY_ERRORS",
        "MAX_QUERY_ERRORS",
        "ERROR_CAP",
        "QUERY_ERROR_CAP",
    ),
    "tool_turn_tokens": ("MAX_TOKENS_PER_TURN", "TOOL_TURN_TOKENS", "MAX_TURN_TOKENS"),
    "final_turn_tokens": ("FINAL_TURN_TOKENS", "MAX_FINAL_TOKENS", "MAX_FINAL_TURN_TOKENS"),
    "episode_tokens": ("EPISODE_TOKENS", "MAX_EPISODE_TOKENS", "EPISODE_TOKEN_BUDGET"),
}


@dataclass(frozen=True)
class AgentProtocol:
    """Everything about how an episode is prompted, budgeted and sampled."""

    system_prompt: str = builtin_prompt.SYSTEM_PROMPT
    user_template: str = builtin_prompt.USER_TEMPLATE
    budget_template: str = builtin_prompt.BUDGET_TEMPLATE
    budget_template_one: str = builtin_prompt.BUDGET_TEMPLATE_ONE
    exploration_limit: str = builtin_prompt.EXPLORATION_LIMIT
    exploration_limit_with_query: str = builtin_prompt.EXPLORATION_LIMIT_WITH_QUERY
    tool_result_prefix: str = builtin_prompt.TOOL_RESULT_PREFIX
    tool_turns: int = 6
    max_query_errors: int = 4
    tool_turn_tokens: int = 2048
    final_turn_tokens: int = 3072
    episode_tokens: int = 12288
    context_tokens: int = 16384
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop: tuple[str, ...] = STOP_STRINGS
    prompt_source: str = BUILTIN
    sampling_source: str = "default"
    # The assistant-turn opener; ``None`` means "derive it from the engine's chat template".
    assistant_opener: str | None = None
    constants: dict[str, Constant] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def user_text(self, question: str) -> str:
        """The first user turn's content for ``question``."""
        return fill_template(self.user_template, question, prefer="question")

    def prompt_head(self, question: str) -> str:
        """System and user turns in ChatML, up to (not including) the assistant opener."""
        return (
            f"<|im_start|>system\n{self.system_prompt}<|im_end|>\n"
            f"<|im_start|>user\n{self.user_text(question)}<|im_end|>\n"
        )

    def budget_line(self, tool_turns_left: int) -> str:
        """The line that ends a tool-result turn, e.g. ``[4 tool turns left before you must answer]``."""
        if tool_turns_left == 1:
            return self.budget_template_one
        return fill_template(self.budget_template, str(tool_turns_left), prefer="n")

    def exploration_limit_message(self, last_working_sql: str | None) -> str:
        """The message that replaces the budget line before the final turn."""
        if last_working_sql:
            return fill_template(self.exploration_limit_with_query, last_working_sql, prefer="sql")
        return self.exploration_limit


def fill_template(template: str, value: str, prefer: str) -> str:
    """Put ``value`` into ``template``'s one placeholder, whatever it is called.

    Templates read from a ``sqale_agent.py`` may name their placeholder differently from ours
    (``{question}``, ``{q}``, ``{}``); a field whose name contains ``prefer`` gets the value, and so
    does the only field when there is just one; other fields become empty.  Literal braces in a
    template (``{{``) survive as in ``str.format``.
    """
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError:
        return template
    if not fields:
        return template.replace("{{", "{").replace("}}", "}")
    only = len(set(fields)) == 1
    values: dict[str, str] = {}
    positional: list[str] = []
    for name in fields:
        chosen = value if only or prefer in name.lower() else ""
        if name == "" or name.isdigit():
            positional.append(chosen)
        else:
            values[name] = chosen
    try:
        return template.format(*positional, **values)
    except (IndexError, KeyError, ValueError, AttributeError):
        return template.replace("{" + fields[0] + "}", value)


def load_protocol(model_dir: Path | None) -> AgentProtocol:
    """The protocol for a model whose files lie in ``model_dir`` (``None``: the built-in one).

    Never raises for a missing or broken file: it falls back to the built-in strings or default
    sampling and says why in ``notes`` (the UI and ``--trace`` show them).
    """
    protocol = AgentProtocol()
    if model_dir is None:
        return protocol
    notes: list[str] = []
    agent_file = model_dir / AGENT_FILE
    if agent_file.is_file():
        protocol = _apply_agent_file(protocol, agent_file, notes)
    config_file = model_dir / GENERATION_CONFIG
    if config_file.is_file():
        protocol = _apply_generation_config(protocol, config_file, notes)
    return replace(protocol, notes=tuple(notes))


def _apply_agent_file(protocol: AgentProtocol, path: Path, notes: list[str]) -> AgentProtocol:
    try:
        constants = read_constants(path)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as exc:
        notes.append(f"{path} could not be read ({type(exc).__name__}); using the built-in prompt")
        _log.warning("could not read %s: %s", path, exc)
        return protocol
    system = constants.get("SYSTEM_PROMPT")
    user = constants.get("USER_TEMPLATE")
    changes: dict[str, Any] = {"constants": constants}
    if isinstance(system, str) and isinstance(user, str):
        changes.update(system_prompt=system, user_template=user, prompt_source=f"{AGENT_FILE}:{path}")
    else:
        notes.append(f"{path} has no literal SYSTEM_PROMPT and USER_TEMPLATE; using the built-in prompt")
    for attribute, names in _INT_NAMES.items():
        for name in names:
            found = constants.get(name)
            if isinstance(found, int) and not isinstance(found, bool) and found > 0:
                changes[attribute] = found
                break
    changes.update(_protocol_messages(constants))
    return replace(protocol, **changes)


def _protocol_messages(constants: dict[str, Constant]) -> dict[str, str]:
    """Budget and exploration-limit strings, recognised by their wording rather than their names."""
    found: dict[str, str] = {}
    for text in constants.values():
        if not isinstance(text, str):
            continue
        fields = _fields(text)
        if fields is None:
            continue
        if text.startswith("You have reached the exploration limit"):
            if len(set(fields)) == 1:
                found.setdefault("exploration_limit_with_query", text)
            elif not fields:
                found.setdefault("exploration_limit", text)
        elif "tool turns left" in text and len(set(fields)) == 1:
            found.setdefault("budget_template", text)
        elif "tool turn left" in text and not fields:
            found.setdefault("budget_template_one", text)
    return found


def _fields(template: str) -> list[str] | None:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError:
        return None


def _apply_generation_config(protocol: AgentProtocol, path: Path, notes: list[str]) -> AgentProtocol:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        notes.append(f"{path} could not be read ({type(exc).__name__}); using default sampling")
        return protocol
    if not isinstance(data, dict):
        notes.append(f"{path} is not a JSON object; using default sampling")
        return protocol
    sampling = protocol.sampling
    changes: dict[str, Any] = {}
    for key, attribute, kind in (
        ("temperature", "temperature", float),
        ("top_p", "top_p", float),
        ("top_k", "top_k", int),
        ("min_p", "min_p", float),
        ("repetition_penalty", "repeat_penalty", float),
    ):
        value = data.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            changes[attribute] = kind(value)
    if not changes:
        return protocol
    return replace(
        protocol, sampling=replace(sampling, **changes), sampling_source=f"{GENERATION_CONFIG}:{path}"
    )
