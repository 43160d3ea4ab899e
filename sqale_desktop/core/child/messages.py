"""The messages between a parent and its child, one definition for both ends.

The parent writes one plan (a JSON object) on the child's stdin and keeps stdin open: its end of
file tells the child that the parent is gone, and the child ends at once rather than run on as an
orphan.  The child writes :class:`Message` lines (JSON) on its stdout: ``step`` (a new unit of
work: the parent restarts its deadline), ``alive`` (still working: restarts it too), ``progress``
and ``note`` (passed to the caller), then one ``done`` (with the result) or ``error`` (with the
message for people).  JSON, not pickle: a child that parsed a hostile file must not be able to
name a class or a function in the parent.

In the child, :func:`serve` is the whole entry: it takes the protocol's stdout for itself (fd 1
is pointed at stderr, so a library's stray ``print`` or a native library's output cannot break a
line), reads the plan, runs the work and turns every way it can end (a result, a known error, a
``MemoryError`` at the cap, a bug, a pyo3 panic, which is a ``BaseException``) into one last
message.  In a fork server (:mod:`.forks`) it forks each child there, after the module's
imports, and each forked child serves one plan the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal, NoReturn, cast

from sqale_desktop.core.child import forks, launch
from sqale_desktop.core.errors import KnownError

Kind = Literal["step", "alive", "progress", "note", "done", "error"]
KINDS: frozenset[str] = frozenset(("step", "alive", "progress", "note", "done", "error"))


@dataclass(frozen=True)
class Message:
    """One line of the child's protocol: its ``kind`` and its fields (plain JSON values)."""

    kind: Kind
    data: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        return (json.dumps({"kind": self.kind, **self.data}, ensure_ascii=True) + "\n").encode("ascii")

    @staticmethod
    def decode(line: bytes | str) -> Message | None:
        """The message on ``line``, or None for a line that is not the protocol's."""
        try:
            value = json.loads(line)
        except ValueError:
            return None
        if not isinstance(value, dict) or value.get("kind") not in KINDS:
            return None
        kind = cast(Kind, value.pop("kind"))
        return Message(kind, value)


class Endpoint:
    """The child's end: :meth:`say` writes a message; the plan came in on stdin."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._lock = threading.Lock()

    def say(self, kind: Kind, **data: Any) -> None:
        line = Message(kind, data).encode()
        with self._lock:
            self._out.write(line)
            self._out.flush()


def serve(
    work: Callable[[dict[str, Any], Endpoint], Mapping[str, Any] | None],
    warm: Sequence[forks.WarmStep] = (),
) -> NoReturn:
    """Run ``work(plan, endpoint)`` as this child's whole life, then end the process (status 0
    after ``done``, 1 after ``error``).

    ``work`` returns the ``done`` message's fields; a :class:`KnownError` it raises is sent as
    ``error`` with its text; anything else too, after its traceback went to stderr (the log).
    ``warm`` names the modules the work will need (or calls that load its libraries), taken
    before the plan is read (a spare started ahead takes them while it waits; a fork server
    while it is idle)."""
    server = os.environ.pop(forks.FORKS_ENV, None)
    if server is not None:
        forks.serve_forks(int(server), warm)  # returns in each forked child, which serves as below
    else:
        for step in warm:
            forks.warm_up(step)
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # anything else written to stdout goes to stderr, beside the protocol
    sys.stdout = sys.stderr
    endpoint = Endpoint(out)
    stdin = sys.stdin.buffer
    line = stdin.readline()
    if not line:  # a spare whose parent ended (or never needed it): no work, nothing left
        _orphaned(0)
    plan = json.loads(line)

    def watch_parent() -> None:
        stdin.read()  # end of file: the parent closed its end or died
        _orphaned(3)

    threading.Thread(target=watch_parent, name="child-parent-watch", daemon=True).start()
    endpoint.say("alive")  # started: from here the parent's step deadline (if any) applies
    try:
        result = work(plan, endpoint)
    except MemoryError:
        cap = launch.applied_memory_mb
        text = f"it reached its memory cap{f' of {cap} MB' if cap else ''}"
        _exit(endpoint, 1, "error", error="memory", text=text)
    except KnownError as exc:
        _exit(endpoint, 1, "error", error="known", text=str(exc))
    except BaseException as exc:  # a bug, or a pyo3 PanicException (a BaseException): a message
        traceback.print_exc()
        name = type(exc).__name__
        _exit(endpoint, 1, "error", error="bug", text=f"{name}: {exc}" if str(exc) else name)
    _exit(endpoint, 0, "done", **(result or {}))


def _orphaned(status: int) -> NoReturn:
    """The parent is gone: remove the private temporary folder it made for this child (the parent
    cannot any more), then end."""
    import shutil
    import tempfile

    folder = tempfile.gettempdir()
    if os.path.basename(folder).startswith("sqale-child-"):
        shutil.rmtree(folder, ignore_errors=True)
    os._exit(status)


def _exit(endpoint: Endpoint, status: int, kind: Kind, **data: Any) -> NoReturn:
    """Say the last message and end now, without the interpreter's shutdown: the work's files are
    closed, and a shutdown under the daemon thread that watches stdin (and under a library's own
    threads) can abort ("could not acquire lock for stdin at interpreter shutdown") after the
    answer, which the parent would read as a crash."""
    endpoint.say(kind, **data)
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(status)
