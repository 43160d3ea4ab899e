"""The eight tools as the model knows them: names, arguments, and checking a call before it runs.

Checking here (rather than letting a tool raise) is what keeps a malformed call an error *text* for
the model: a wrong name, a missing argument or a wrong type becomes one line the model can act on,
and the episode goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.tools import specs as tools_specs

ParamKind = Literal["str", "int"]


@dataclass(frozen=True)
class Param:
    name: str
    kind: ParamKind
    required: bool = True


@dataclass(frozen=True)
class ToolSpec:
    name: str
    params: tuple[Param, ...] = ()


def _from_tool_specs() -> dict[str, ToolSpec]:
    """The tool box's own specs (``core.tools.specs``), so the two never disagree about a signature."""
    return {
        spec.name: ToolSpec(
            spec.name,
            tuple(
                Param(arg.name, "int" if arg.type == "integer" else "str", arg.required) for arg in spec.args
            ),
        )
        for spec in tools_specs.TOOL_SPECS
    }


TOOL_SPECS: dict[str, ToolSpec] = _from_tool_specs()
TOOL_NAMES: tuple[str, ...] = tuple(TOOL_SPECS)

# Argument names the model sometimes shortens; mapped rather than rejected.
_ALIASES = {"table": "table_name", "column": "column_name", "query": "sql"}


class CallError(KnownError, ValueError):
    """A call that cannot run; the message is written for the model."""


def check_call(tool: Any, args: Any) -> tuple[str, dict[str, Any]]:
    """The tool name and cleaned arguments of a call, or :class:`CallError` saying what is wrong.

    Lenient where the intent is clear: a missing or ``null`` ``args`` is ``{}``, a list of
    arguments is taken in the order of the signature, ``"5"`` is accepted for an integer,
    ``table``/``column``/``query`` stand for ``table_name``/``column_name``/``sql``, and arguments
    a tool does not take are dropped.
    """
    if not isinstance(tool, str) or not tool.strip():
        raise CallError('the "tool" field must be the name of a tool')
    name = tool.strip()
    spec = TOOL_SPECS.get(name)
    if spec is None:
        raise CallError(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
    if args is None:
        args = {}
    if isinstance(args, list):
        if len(args) > len(spec.params):
            raise CallError(f"{name} takes at most {len(spec.params)} arguments, got {len(args)}")
        args = {param.name: value for param, value in zip(spec.params, args, strict=False)}
    if not isinstance(args, dict):
        raise CallError(f'"args" of {name} must be a JSON object')
    given = {(_ALIASES.get(key, key) if isinstance(key, str) else key): value for key, value in args.items()}
    cleaned: dict[str, Any] = {}
    for param in spec.params:
        value = given.get(param.name)
        if value is None:
            if param.required:
                raise CallError(f"{name} needs the argument {param.name!r}")
            continue
        cleaned[param.name] = _convert(name, param, value)
    return name, cleaned


def _convert(tool: str, param: Param, value: Any) -> Any:
    if param.kind == "str":
        if not isinstance(value, str):
            raise CallError(f"{tool}: {param.name!r} must be a string")
        if not value.strip():
            raise CallError(f"{tool}: {param.name!r} must not be empty")
        return value
    if isinstance(value, bool):
        raise CallError(f"{tool}: {param.name!r} must be an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdecimal():
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise CallError(f"{tool}: {param.name!r} must be an integer")
