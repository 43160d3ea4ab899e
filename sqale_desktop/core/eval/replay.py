"""Replay scripts for evaluation runs: scripted completions per question, to test the harness.

A script file maps question ids to the completions of their episodes: a JSON object
``{"<id>": ["<completion>", ...]}`` or JSON Lines of ``{"id": ..., "completions": [...]}``.
``gold_script`` writes the script of an agent that submits the gold SQL at once: a run with it
must score 100 %, which checks the harness end to end (conditions, tools, loop, scorer).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from sqale_desktop.core.engines.base import Engine, EngineError
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.eval.questions import EvalQuestion


def submit_completion(sql: str, thought: str = "I will submit the query.") -> str:
    """One assistant turn, in the trained format, that calls ``submit_sql`` with ``sql``."""
    call = json.dumps({"tool": "submit_sql", "args": {"sql": sql}}, ensure_ascii=False)
    return f"<think>\n{thought}\n</think>\n\n{call}"


def gold_script(question: EvalQuestion) -> list[str]:
    return [submit_completion(question.gold_sql)]


def load_scripts(path: Path) -> dict[str, list[str]]:
    """Scripts by question key from ``path``; raises ``EngineError`` with a message for people."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EngineError(f"cannot read the replay file {path}: {exc.strerror or exc}") from None
    try:
        try:
            whole = json.loads(text)
        except ValueError:
            whole = None  # JSON Lines
        if isinstance(whole, dict) and "id" not in whole:
            items = list(whole.items())
        else:
            lines = (
                [whole]
                if isinstance(whole, dict)
                else [json.loads(ln) for ln in text.splitlines() if ln.strip()]
            )
            items = [(record["id"], record["completions"]) for record in lines]
    except (ValueError, KeyError, TypeError) as exc:
        raise EngineError(
            f"the replay file {path} must map question ids to completion lists (JSON object, or JSON "
            f'Lines of {{"id": ..., "completions": [...]}}): {exc}'
        ) from None
    scripts: dict[str, list[str]] = {}
    for key, completions in items:
        if not isinstance(completions, list) or not all(isinstance(c, str) for c in completions):
            raise EngineError(f"the replay file {path}: the completions of {key} are not a list of strings")
        scripts[str(key)] = completions
    return scripts


def replay_engine_for(
    scripts: Mapping[str, Sequence[str]] | Callable[[EvalQuestion], Sequence[str]],
) -> Callable[[EvalQuestion, int], Engine]:
    """An ``EngineFor`` that replays each question's own script (an empty one: no answer)."""

    def engine_for(question: EvalQuestion, index: int) -> Engine:
        completions = scripts(question) if callable(scripts) else scripts.get(question.key, ())
        return ReplayEngine(list(completions), chunk_chars=4096)

    return engine_for
