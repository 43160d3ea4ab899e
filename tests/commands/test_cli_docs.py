"""Documentation is tested: every CLI command is in README.md, and the README names no stale command.

Modelled on sqlite-utils' ``tests/test_docs.py``.  What README.md must contain (the lead writes the
section; this docstring is the contract):

* Every command path that ``sqale_desktop.cli.build_parser()`` registers appears in *code* in the
  README -- a fenced block or an inline ``code span`` -- as ``sqale-desktop <command>`` for a
  top-level command and ``sqale-desktop <group> <command>`` for a nested one (a group is documented
  by any of its commands).  Arguments and options may follow: ``sqale-desktop ask shop.sqlite "How
  many orders?"`` documents ``ask``.  ``python -m sqale_desktop <command>`` counts the same.
* Options and placeholders end a mention: ``sqale-desktop <command> --help`` names no command.
* Prose outside code is not scanned, so "sqale-desktop is a desktop app" needs no command ``is``.
* Every such mention in code must name a registered command (or alias): a renamed or removed
  command makes the README stale, and this test fails until the README follows.
* Every module listed in ``sqale_desktop.commands.COMMAND_MODULES`` exists and registers at least
  one command.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop import cli
from sqale_desktop.commands import COMMAND_MODULES

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"

CommandPath = tuple[str, ...]

_FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE = re.compile(r"(`+)(.+?)\1", re.DOTALL)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _canonical(sub: argparse._SubParsersAction[Any], parser: argparse.ArgumentParser) -> str:
    """The name a sub-parser was added under: ``choices`` lists it before its aliases."""
    return next(name for name, candidate in sub.choices.items() if candidate is parser)


def command_paths(parser: argparse.ArgumentParser, prefix: CommandPath = ()) -> Iterator[CommandPath]:
    """Every command path under ``parser`` by canonical name (aliases are not listed separately)."""
    sub = _subparsers(parser)
    if sub is None:
        return
    for name, child in sub.choices.items():
        if _canonical(sub, child) == name:
            yield (*prefix, name)
            yield from command_paths(child, (*prefix, name))


def code_snippets(markdown: str) -> Iterator[str]:
    """The text of fenced code blocks, then of inline code spans in the remaining text."""
    rest = markdown
    for match in _FENCE.finditer(markdown):
        yield match.group(2)
    rest = _FENCE.sub("", markdown)
    for match in _INLINE.finditer(rest):
        yield match.group(2)


def _invocations(code: str) -> Iterator[list[str]]:
    """The argument lists that follow ``sqale-desktop`` (or ``python -m sqale_desktop``) in code."""
    for line in code.replace("\\\n", " ").splitlines():
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:  # unbalanced quotes in a snippet that is not a shell command
            tokens = line.split()
        for i, token in enumerate(tokens):
            if token.rsplit("/", 1)[-1] == "sqale-desktop" or (
                token == "sqale_desktop" and i > 0 and tokens[i - 1] == "-m"
            ):
                yield tokens[i + 1 :]


def documented(parser: argparse.ArgumentParser, markdown: str) -> tuple[set[CommandPath], list[str]]:
    """Command paths the markdown's code mentions, and mentions that name no registered command."""
    found: set[CommandPath] = set()
    unknown: list[str] = []
    for snippet in code_snippets(markdown):
        for args in _invocations(snippet):
            current, path = parser, ()
            for token in args:
                sub = _subparsers(current)
                if sub is None or token.startswith(("-", "<", "[")):
                    break
                if token not in sub.choices:
                    unknown.append(" ".join(("sqale-desktop", *path, token)))
                    break
                current = sub.choices[token]
                # An alias documents the canonical command it stands for.
                path = (*path, _canonical(sub, current))
                found.add(path)
    return found, unknown


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return cli.build_parser()


def test_every_command_module_registers_commands() -> None:
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"sqale_desktop.commands.{name}")
        probe = argparse.ArgumentParser()
        module.register(probe.add_subparsers())
        assert list(command_paths(probe)), f"sqale_desktop.commands.{name} registers no command"


def test_every_command_is_documented_in_the_readme(parser: argparse.ArgumentParser) -> None:
    found, _ = documented(parser, README.read_text(encoding="utf-8"))
    missing = [" ".join(("sqale-desktop", *p)) for p in command_paths(parser) if p not in found]
    assert missing == [], "README.md does not show these commands in code:\n" + "\n".join(missing)


def test_the_readme_names_no_unknown_command(parser: argparse.ArgumentParser) -> None:
    _, unknown = documented(parser, README.read_text(encoding="utf-8"))
    assert unknown == [], "README.md shows commands that do not exist:\n" + "\n".join(unknown)


def test_every_command_has_working_help(
    parser: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str]
) -> None:
    for path in command_paths(parser):
        with pytest.raises(SystemExit) as exited:
            parser.parse_args([*path, "--help"])
        assert exited.value.code == 0, path
        assert "usage: sqale-desktop " + " ".join(path) in capsys.readouterr().out


def test_python_m_help_exits_0_without_qt(parser: argparse.ArgumentParser) -> None:
    """``python -m sqale_desktop --help`` works, and does so with PySide6 impossible to import."""
    script = textwrap.dedent(
        """
        import runpy, sys

        class BlockQt:
            def find_spec(self, name, path=None, target=None):
                if name == "PySide6" or name.startswith("PySide6."):
                    raise ImportError("PySide6 is blocked in this test")
                return None

        sys.meta_path.insert(0, BlockQt())
        sys.argv = ["sqale-desktop", "--help"]
        runpy.run_module("sqale_desktop", run_name="__main__")
        """
    )
    for command in ([sys.executable, "-m", "sqale_desktop", "--help"], [sys.executable, "-c", script]):
        done = subprocess.run(
            command, cwd=REPO_ROOT, capture_output=True, text=True, check=False, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: sqale-desktop")
        for (name,) in (p for p in command_paths(parser) if len(p) == 1):
            assert name in done.stdout


def _toy_parser() -> argparse.ArgumentParser:
    toy = argparse.ArgumentParser(prog="sqale-desktop")
    commands = toy.add_subparsers()
    ask = commands.add_parser("ask", aliases=["a"])
    ask.add_argument("db")
    models = commands.add_parser("model").add_subparsers()
    models.add_parser("download")
    models.add_parser("list")
    return toy


def test_the_readme_scanner_reads_code_only_and_resolves_groups() -> None:
    """The scanner itself: code counts, prose does not; nested commands, aliases and stale names."""
    markdown = textwrap.dedent(
        """
        sqale-desktop is an app; sqale-desktop list in prose is ignored.

        ```bash
        $ sqale-desktop a shop.sqlite --max-rows 5   # the alias documents `ask`
        .venv/bin/sqale-desktop model download \\
            trl-lab/qwen3.5-2b-grpo-synsql
        sqale-desktop --version
        sqale-desktop <command> [options]
        ```

        Run `python -m sqale_desktop model list` or `sqale-desktop frobnicate`.
        """
    )
    found, unknown = documented(_toy_parser(), markdown)
    assert found == {("ask",), ("model",), ("model", "download"), ("model", "list")}
    assert unknown == ["sqale-desktop frobnicate"]
    expected = [("ask",), ("model",), ("model", "download"), ("model", "list")]
    assert list(command_paths(_toy_parser())) == expected
