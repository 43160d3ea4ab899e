"""One error model: every error family of core is a ``KnownError``; ``is_known`` draws the line (issue 11)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sqlite3

import pytest

import sqale_desktop.core
from sqale_desktop.core.db.errors import DatabaseError, QueryTimeout
from sqale_desktop.core.engines.base import EngineError
from sqale_desktop.core.errors import KnownError, is_known
from sqale_desktop.core.models.errors import ModelError
from sqale_desktop.core.secrets import SecretError
from sqale_desktop.core.tools.arguments import CallError

# Run as a child process's main (``python -m``): importing them is not the point of the test.
_NOT_IMPORTED = {"sqale_desktop.core.models.convert.verify", "sqale_desktop.core.models.convert.quantize"}


def _public_exception_classes() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(sqale_desktop.core.__path__, "sqale_desktop.core."):
        if info.name in _NOT_IMPORTED:
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
                and not name.startswith("_")
            ):
                found.append(obj)
    return found


def test_every_public_core_error_is_a_known_error() -> None:
    classes = _public_exception_classes()
    assert DatabaseError in classes and ModelError in classes  # the walk reaches the families
    assert [c.__qualname__ for c in classes if not issubclass(c, KnownError)] == []


def test_the_old_built_in_bases_are_kept() -> None:
    """``except RuntimeError`` / ``except ValueError`` written before the change still catch them."""
    assert issubclass(EngineError, RuntimeError)
    assert issubclass(SecretError, RuntimeError)
    assert issubclass(CallError, ValueError)


@pytest.mark.parametrize(
    "exc",
    [
        QueryTimeout("the query ran past 5 s"),
        EngineError("the server is unreachable"),
        ModelError("not a GGUF"),
        FileNotFoundError("no such file"),
        sqlite3.OperationalError("database is locked"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_conditions_of_the_world_are_known(exc: BaseException) -> None:
    assert is_known(exc)


@pytest.mark.parametrize(
    "exc",
    [TypeError("bad call"), AttributeError("x"), KeyError("k"), ValueError("v"), RuntimeError("r")],
    ids=lambda e: type(e).__name__,
)
def test_bugs_are_not_known(exc: BaseException) -> None:
    assert not is_known(exc)
