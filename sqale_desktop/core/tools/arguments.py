"""Checking the calls a model wrote, so that a wrong call becomes error text, never a crash.

The one home of call checking (the agent's parser and the tool box both use it), over the one
list of tools in :mod:`core.tools.specs`.  There are two steps, on purpose:

- :func:`read_call` is what the parser runs on a call it found in the model's text.  It is lenient
  where the intent is clear (aliases, positional lists, ``"5"`` for an integer, extra arguments
  dropped), because the small model writes such calls and training accepted them.
- :func:`check_call` is what :meth:`ToolBox.call` runs before a tool: strict (unknown arguments are
  refused, ``limit`` must be 1..``MAX_LIMIT``), because direct callers (the ``tool`` command, tests)
  hand it arguments that nobody normalised.

Their error texts differ and stay as they are: each is text the model (or the user) reads, fixed
by the golden tests and the published episodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.tools.specs import SPECS_BY_NAME, TOOL_NAMES, ToolArg, ToolSpec

MAX_LIMIT = 100


class BadArguments(KnownError):
    """A tool call the model got wrong; ``str()`` is the message for the model."""


class CallError(BadArguments, ValueError):
    """A call found in the model's text that cannot run (:func:`read_call`); the message is
    written for the model."""


# Argument names the model sometimes shortens; mapped rather than rejected.
_ALIASES = {"table": "table_name", "column": "column_name", "query": "sql"}


def read_call(tool: Any, args: Any) -> tuple[str, dict[str, Any]]:
    """The tool name and cleaned arguments of a call, or :class:`CallError` saying what is wrong.

    Lenient where the intent is clear: a missing or ``null`` ``args`` is ``{}``, a list of
    arguments is taken in the order of the signature, ``"5"`` is accepted for an integer,
    ``table``/``column``/``query`` stand for ``table_name``/``column_name``/``sql``, and arguments
    a tool does not take are dropped.
    """
    if not isinstance(tool, str) or not tool.strip():
        raise CallError('the "tool" field must be the name of a tool')
    name = tool.strip()
    spec = SPECS_BY_NAME.get(name)
    if spec is None:
        raise CallError(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
    if args is None:
        args = {}
    if isinstance(args, list):
        if len(args) > len(spec.args):
            raise CallError(f"{name} takes at most {len(spec.args)} arguments, got {len(args)}")
        args = {arg.name: value for arg, value in zip(spec.args, args, strict=False)}
    if not isinstance(args, dict):
        raise CallError(f'"args" of {name} must be a JSON object')
    given = {(_ALIASES.get(key, key) if isinstance(key, str) else key): value for key, value in args.items()}
    cleaned: dict[str, Any] = {}
    for arg in spec.args:
        value = given.get(arg.name)
        if value is None:
            if arg.required:
                raise CallError(f"{name} needs the argument {arg.name!r}")
            continue
        cleaned[arg.name] = _read_value(name, arg, value)
    return name, cleaned


def _read_value(tool: str, arg: ToolArg, value: Any) -> Any:
    if arg.type != "integer":
        if not isinstance(value, str):
            raise CallError(f"{tool}: {arg.name!r} must be a string")
        if not value.strip():
            raise CallError(f"{tool}: {arg.name!r} must not be empty")
        return value
    if isinstance(value, bool):
        raise CallError(f"{tool}: {arg.name!r} must be an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdecimal():
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise CallError(f"{tool}: {arg.name!r} must be an integer")


def check_call(spec: ToolSpec, args: object) -> dict[str, Any]:
    """The call's arguments by name, after checking names, presence and types (strict; see the
    module docstring for why :func:`read_call` is not)."""
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise BadArguments(f"{spec.name} arguments must be a JSON object, got {type(args).__name__}")
    expected = {arg.name: arg for arg in spec.args}
    unknown = [str(name) for name in args if name not in expected]
    if unknown:
        wanted = ", ".join(expected) if expected else "no arguments"
        raise BadArguments(f"{spec.name} got unexpected argument {', '.join(unknown)}; it takes {wanted}")
    checked: dict[str, Any] = {}
    for name, arg in expected.items():
        value = args.get(name)
        if value is None:
            if arg.required:
                raise BadArguments(f"{spec.name} needs {name}")
            continue
        if arg.type == "integer":
            checked[name] = parse_limit(value, name)
        elif not isinstance(value, str):
            raise BadArguments(f"{name} must be a string, got {type(value).__name__}")
        elif not value.strip():
            raise BadArguments(f"{name} must not be empty")
        else:
            checked[name] = value
    return checked


def parse_limit(value: object, name: str = "limit") -> int:
    """An integer from 1 to ``MAX_LIMIT``; numeric strings and whole floats are accepted."""
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        number = int(value.strip())
    if number is None:
        raise BadArguments(f"{name} must be an integer from 1 to {MAX_LIMIT}, got {value!r}")
    if not 1 <= number <= MAX_LIMIT:
        raise BadArguments(f"{name} must be an integer from 1 to {MAX_LIMIT}, got {number}")
    return number


def unknown_tool(name: object) -> str:
    return f"unknown tool: {name}. Tools: {', '.join(TOOL_NAMES)}"
