"""Reading an assistant completion: its think block, its tool calls, its final SQL.

Lenient where the model is sloppy (code fences around the JSON, prose after it, several objects
on a line, raw newlines inside a SQL string, a missing ``args``), strict where it matters: a call
that cannot run becomes a :class:`ParsedCall` with an ``error`` for the model, never an
exception.  Nothing here raises on any input (a hypothesis test checks it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import sqlparse

from sqale_desktop.core.engines.base import valid_text
from sqale_desktop.core.tools.arguments import CallError, read_call
from sqale_desktop.core.tools.specs import SPECS_BY_NAME

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

# strict=False accepts raw newlines and tabs inside strings: models write multi-line SQL that way.
_DECODER = json.JSONDecoder(strict=False)
_CALL_START = re.compile(r'\{\s*"(?:tool|name)"\s*:')
_FENCE = re.compile(r"```[ \t]*([A-Za-z]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_SQL_LINE_START = re.compile(r"(?im)^[ \t]*(?:SELECT|WITH)\b")
_SQL_ANYWHERE = re.compile(r"(?i)\bSELECT\s")
_MAX_RAW = 400
# A JSON escape that decodes to a surrogate (a lone one unless a low one follows a high one).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


@dataclass(frozen=True)
class ParsedCall:
    """One tool call found in a completion; ``error`` says why it cannot run (``None``: it can)."""

    tool: str
    args: dict[str, Any]
    raw: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ParsedTurn:
    think: str
    answer: str
    think_closed: bool
    calls: list[ParsedCall] = field(default_factory=list)


def split_think(text: str, starts_in_think: bool) -> tuple[str, str, bool]:
    """``(think, answer, closed)``: the reasoning, the text after ``</think>``, whether it was closed.

    A completion cut off inside its think block has no answer: what it was about to call is not a
    call yet.
    """
    end = text.rfind(THINK_CLOSE)
    if end >= 0:
        think = text[:end]
        start = think.find(THINK_OPEN)
        if start >= 0:
            think = think[start + len(THINK_OPEN) :]
        return think, text[end + len(THINK_CLOSE) :], True
    if starts_in_think or text.lstrip().startswith(THINK_OPEN):
        start = text.find(THINK_OPEN)
        return (text[start + len(THINK_OPEN) :] if start >= 0 else text), "", False
    return "", text, True


def parse_completion(text: str, starts_in_think: bool = True) -> ParsedTurn:
    """Every tool call after the think block, in order."""
    think, answer, closed = split_think(text, starts_in_think)
    return ParsedTurn(think=think, answer=answer, think_closed=closed, calls=find_calls(answer))


def find_calls(answer: str) -> list[ParsedCall]:
    """The JSON tool calls in ``answer``, valid or not, in the order written."""
    calls: list[ParsedCall] = []
    position = 0
    while True:
        start = answer.find("{", position)
        if start < 0:
            return calls
        try:
            obj, end = _DECODER.raw_decode(answer, start)
        except (ValueError, RecursionError) as exc:
            if _CALL_START.match(answer, start):
                if isinstance(exc, json.JSONDecodeError):
                    where = exc.pos - start + 1
                    reason = f"{exc.msg.removesuffix(' at')} at character {where} of the call"
                elif isinstance(exc, RecursionError):
                    reason = "too deeply nested"
                else:  # Python refuses integers of more than sys.get_int_max_str_digits() digits
                    reason = f"a number is too long ({str(exc).split(';')[0]})"
                raw = answer[start:].split("\n", 1)[0][:_MAX_RAW]
                calls.append(ParsedCall("", {}, raw, f"the tool call is not valid JSON: {reason}"))
            position = start + 1
            continue
        raw = answer[start:end][:_MAX_RAW]
        position = end
        if _SURROGATE_ESCAPE.search(answer, start, end):
            obj = _valid_strings(obj)
        if isinstance(obj, dict):
            call = _call_from_object(obj, raw)
            if call is not None:
                calls.append(call)


def _valid_strings(value: Any) -> Any:
    """``value`` with every string (mapping keys included) made valid UTF-8 by ``valid_text``.

    The engines clean what they generate, but a JSON escape such as ``"\\ud800"`` only becomes a
    lone surrogate here, when the call is decoded; left in, it fails the first strict encode (the
    history, ``ask --json``).  Iterative, so a deep object the decoder accepted cannot recurse.
    """
    root = [value]
    pending: list[tuple[list[Any] | dict[Any, Any], Any, Any]] = [(root, 0, value)]
    while pending:
        holder, slot, item = pending.pop()
        if isinstance(item, str):
            holder[slot] = valid_text(item)
        elif isinstance(item, list):
            copy = list(item)
            holder[slot] = copy
            pending.extend((copy, i, v) for i, v in enumerate(copy))
        elif isinstance(item, dict):
            copy_d = {valid_text(k) if isinstance(k, str) else k: v for k, v in item.items()}
            holder[slot] = copy_d
            pending.extend((copy_d, k, v) for k, v in copy_d.items())
    return root[0]


def _call_from_object(obj: dict[str, Any], raw: str) -> ParsedCall | None:
    if "tool" in obj:
        tool = obj["tool"]
    elif isinstance(obj.get("name"), str) and obj["name"] in SPECS_BY_NAME:
        tool = obj["name"]
    else:
        return None  # a JSON object that is not a call (an example row, an args object on its own)
    if "args" in obj:
        args = obj["args"]
    elif "arguments" in obj:
        args = obj["arguments"]
    else:
        args = {key: value for key, value in obj.items() if key not in ("tool", "name")}
    name = tool if isinstance(tool, str) else ""
    try:
        name, cleaned = read_call(tool, args)
    except CallError as exc:
        return ParsedCall(name, args if isinstance(args, dict) else {}, raw, str(exc))
    return ParsedCall(name, cleaned, raw)


def extract_final_sql(answer: str) -> str | None:
    """The SQL of a final-turn answer: a ``submit_sql`` (or any call carrying ``sql``), a fenced
    block, or bare SQL; ``None`` when there is none.  ``answer`` is the text after ``</think>``.
    """
    calls = find_calls(answer)
    for wanted in ("submit_sql", "run_query"):
        for call in calls:
            if call.ok and call.tool == wanted:
                sql = str(call.args["sql"]).strip()
                if sql:
                    return _first_statement(sql)
    for match in _FENCE.finditer(answer):
        language, body = match.group(1).lower(), match.group(2).strip()
        if body and language in ("", "sql", "sqlite"):
            return _first_statement(body)
    text = answer.strip()
    found = _SQL_LINE_START.search(text) or _SQL_ANYWHERE.search(text)
    if found is None:
        return None
    text = text[found.start() :].strip()
    text = text.split("\n\n", 1)[0]
    return _first_statement(text)


def _first_statement(sql: str) -> str | None:
    try:
        statements = [s.strip() for s in sqlparse.split(sql) if s.strip()]
    except Exception:  # sqlparse is a lexer; a pathological input must not end the episode
        statements = [sql.strip()]
    if not statements:
        return None
    return statements[0].rstrip(";").strip() or None
