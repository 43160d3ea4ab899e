"""Read protocol constants from a model repository's ``sqale_agent.py`` without executing it.

The file is code downloaded from the internet; importing it would run it.  Instead its syntax tree
is walked with :mod:`ast` and only module-level assignments whose value can be worked out
statically are kept: string and number literals, implicit and ``+`` concatenation, references to
constants defined earlier in the file, ``textwrap.dedent(...)`` and ``.strip()``-style calls on
such strings.  Anything else (f-strings, function calls, computed values) is skipped, never run.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

Constant = str | int | float | bool

_STR_METHODS = {"strip", "lstrip", "rstrip"}


class _Unknown(Exception):
    """The value cannot be worked out without running code."""


def read_constants(path: Path) -> dict[str, Constant]:
    """Every module-level ``NAME = <static value>`` of the file, in order; unreadable values are skipped.

    Raises ``OSError`` when the file cannot be read and ``SyntaxError`` when it is not Python.
    """
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    constants: dict[str, Constant] = {}
    for node in tree.body:
        targets: list[ast.expr]
        value: ast.expr | None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        else:
            continue
        if value is None:
            continue
        try:
            evaluated = _evaluate(value, constants)
        except _Unknown:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                constants[target.id] = evaluated
    return constants


def _evaluate(node: ast.expr, known: dict[str, Constant]) -> Constant:
    if isinstance(node, ast.Constant) and isinstance(node.value, str | int | float | bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _evaluate(node.left, known), _evaluate(node.right, known)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        if isinstance(left, str) or isinstance(right, str):
            raise _Unknown
        return left + right
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = _evaluate(node.operand, known)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand
        raise _Unknown
    if isinstance(node, ast.Call) and not node.keywords and len(node.args) <= 1:
        return _evaluate_call(node, known)
    raise _Unknown


def _evaluate_call(node: ast.Call, known: dict[str, Constant]) -> Constant:
    func = node.func
    is_dedent = (isinstance(func, ast.Name) and func.id == "dedent") or (
        isinstance(func, ast.Attribute)
        and func.attr == "dedent"
        and isinstance(func.value, ast.Name)
        and func.value.id == "textwrap"
    )
    if is_dedent and len(node.args) == 1:
        text = _evaluate(node.args[0], known)
        if isinstance(text, str):
            return textwrap.dedent(text)
        raise _Unknown
    if isinstance(func, ast.Attribute) and func.attr in _STR_METHODS:
        text = _evaluate(func.value, known)
        chars: Constant | None = _evaluate(node.args[0], known) if node.args else None
        if isinstance(text, str) and (chars is None or isinstance(chars, str)):
            stripped: str = getattr(text, func.attr)(chars)
            return stripped
    raise _Unknown
