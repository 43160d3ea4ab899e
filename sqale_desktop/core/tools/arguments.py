"""Checking the arguments a model wrote, so that a wrong call becomes error text, never a crash."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.tools.specs import TOOL_NAMES, ToolSpec

MAX_LIMIT = 100


class BadArguments(KnownError):
    """A tool call the model got wrong; ``str()`` is the message for the model."""


def check_call(spec: ToolSpec, args: object) -> dict[str, Any]:
    """The call's arguments by name, after checking names, presence and types."""
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
