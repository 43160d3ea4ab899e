"""A child module for the fork server's tests (``tests/core/test_fork_server_warm_up.py``): each
step of its warm-up writes its name to a file, and its work answers with what the file held when
the work began, so a test sees which steps the server had taken before it forked the child."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqale_desktop.core import child

MODULE = "tests.warm_order_child"
LOG_ENV = "SQALE_DESKTOP_TEST_WARM_LOG"  # the file the steps write to, set by the test
STEPS = ("first", "second", "third")


def _step(name: str) -> Callable[[], None]:
    def step() -> None:
        with open(os.environ[LOG_ENV], "a", encoding="utf-8") as log:
            log.write(name + "\n")

    return step


def _work(plan: dict[str, Any], endpoint: child.Endpoint) -> Mapping[str, Any]:
    del plan, endpoint
    return {"taken": Path(os.environ[LOG_ENV]).read_text(encoding="utf-8").split()}


def child_main(argv: Sequence[str]) -> int:
    del argv
    return child.serve(_work, warm=tuple(_step(name) for name in STEPS))
