"""Read protocol constants from a model repository's ``sqale_agent.py`` without executing it.

The file is code downloaded from the internet; importing it would run it.  Instead its syntax tree
is walked with :mod:`ast` and only module-level assignments whose value can be worked out
statically are kept: string and number literals, implicit and ``+`` concatenation, references to
constants defined earlier in the file, ``textwrap.dedent(...)`` and ``.strip()``-style calls on
such strings.  Anything else (f-strings, function calls, computed values) is skipped, never run.

The file may also be hostile without running: a deeply nested expression exhausts the parser's or
the evaluator's recursion, ``A1 = A0 + A0``, ``A2 = A1 + A1``, ... doubles a string to gigabytes.
So the file's size, an expression's depth, every evaluated constant's size and the total size of
all of them (thousands of constants each just within its own bound would still add up to
gigabytes) are bounded; past
any bound the file is refused as a whole (``UnsafeAgentFile``, a ``ValueError``), and the caller
falls back to the built-in prompt with a note.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from sqale_desktop.core.errors import KnownError

Constant = str | int | float | bool

_STR_METHODS = {"strip", "lstrip", "rstrip"}
# Real sqale_agent.py files are a few kilobytes, their prompts a few thousand characters.
MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 200
MAX_CONSTANT_CHARS = 256 * 1024
MAX_TOTAL_CHARS = 4 * MAX_CONSTANT_CHARS  # the text of all the names the file defines, together


class _Unknown(Exception):
    """The value cannot be worked out without running code."""


class UnsafeAgentFile(KnownError, ValueError):
    """The file is beyond what a real one looks like (too big, too deep, a constant too large)."""


def read_constants(path: Path) -> dict[str, Constant]:
    """Every module-level ``NAME = <static value>`` of the file, in order; unreadable values are skipped.

    Raises ``OSError`` when the file cannot be read, ``SyntaxError`` when it is not Python and
    ``UnsafeAgentFile`` when it passes a bound (see the module docstring).
    """
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UnsafeAgentFile(f"{path.name} is {size:,} bytes, more than the {MAX_FILE_BYTES:,} allowed")
    with path.open("rb") as handle:
        source = handle.read(MAX_FILE_BYTES + 1).decode("utf-8")  # it may grow after the stat
    if len(source) > MAX_FILE_BYTES:
        raise UnsafeAgentFile(f"{path.name} is more than {MAX_FILE_BYTES:,} bytes")
    try:
        tree = ast.parse(source, filename=str(path))
    except (RecursionError, MemoryError):
        raise UnsafeAgentFile(f"{path.name} nests expressions too deeply to parse") from None
    constants: dict[str, Constant] = {}
    total = 0
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
            evaluated = _evaluate(value, constants, 0)
        except _Unknown:
            continue
        except RecursionError:
            raise UnsafeAgentFile(f"{path.name} nests an expression too deeply") from None
        for target in targets:
            if isinstance(target, ast.Name):
                total += _chars(evaluated) - _chars(constants.get(target.id))
                constants[target.id] = evaluated
                if total > MAX_TOTAL_CHARS:
                    raise UnsafeAgentFile(
                        f"{path.name} holds more than {MAX_TOTAL_CHARS:,} characters in all in its constants"
                    )
    return constants


def _chars(value: Constant | None) -> int:
    return len(value) if isinstance(value, str) else 0


def _evaluate(node: ast.expr, known: dict[str, Constant], depth: int) -> Constant:
    if depth > MAX_DEPTH:
        raise UnsafeAgentFile(f"an expression nests more than {MAX_DEPTH} levels deep")
    depth += 1
    if isinstance(node, ast.Constant) and isinstance(node.value, str | int | float | bool):
        return _bounded(node.value)
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _evaluate(node.left, known, depth), _evaluate(node.right, known, depth)
        if isinstance(left, str) and isinstance(right, str):
            if len(left) + len(right) > MAX_CONSTANT_CHARS:
                raise UnsafeAgentFile(f"a constant grows past {MAX_CONSTANT_CHARS:,} characters")
            return left + right
        if isinstance(left, str) or isinstance(right, str):
            raise _Unknown
        return left + right
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = _evaluate(node.operand, known, depth)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand
        raise _Unknown
    if isinstance(node, ast.Call) and not node.keywords and len(node.args) <= 1:
        return _evaluate_call(node, known, depth)
    raise _Unknown


def _bounded(value: Constant) -> Constant:
    if isinstance(value, str) and len(value) > MAX_CONSTANT_CHARS:
        raise UnsafeAgentFile(f"a constant is longer than {MAX_CONSTANT_CHARS:,} characters")
    return value


def _evaluate_call(node: ast.Call, known: dict[str, Constant], depth: int) -> Constant:
    func = node.func
    is_dedent = (isinstance(func, ast.Name) and func.id == "dedent") or (
        isinstance(func, ast.Attribute)
        and func.attr == "dedent"
        and isinstance(func.value, ast.Name)
        and func.value.id == "textwrap"
    )
    if is_dedent and len(node.args) == 1:
        text = _evaluate(node.args[0], known, depth)
        if isinstance(text, str):
            return textwrap.dedent(text)
        raise _Unknown
    if isinstance(func, ast.Attribute) and func.attr in _STR_METHODS:
        text = _evaluate(func.value, known, depth)
        chars: Constant | None = _evaluate(node.args[0], known, depth) if node.args else None
        if isinstance(text, str) and (chars is None or isinstance(chars, str)):
            stripped: str = getattr(text, func.attr)(chars)
            return stripped
    raise _Unknown
