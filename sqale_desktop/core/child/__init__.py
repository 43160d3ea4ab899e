"""One kit for running a step of the app in a child process the app can kill.

Every parser of a user's file (the importers, the evaluation's reduced-copy builder), every call
into native code that can crash or hang (llama.cpp's quantizer, a GPU driver's first load) runs
in a child: a crash, a runaway allocation or a hang there is a message in the app, never the app's
end.  The kit is four small modules, a leaf of ``core`` (it imports nothing of the package but
:mod:`core.errors`, an import-linter contract):

- :mod:`.launch`: the command line that starts a child, from a checkout and from a frozen build,
  and the child's side of that command (``--child-module``), which applies the memory cap;
- :mod:`.messages`: the typed messages both ends exchange (JSON lines), and the child's endpoint;
- :mod:`.supervise`: the parent's side: a deadline, Stop polling, one grace before the kill, a
  private temporary folder, and the child's death described in words (signal, cap, deadline);
- :mod:`.forks`: a warm server that forks the children of a module that runs often (the
  importers), so that none pays the interpreter's start and the module's imports (Linux).

The database worker (``core.db.process``) predates the kit and keeps its own loop (pickled
requests, a pool of warm workers); it uses :mod:`.launch` only.
"""

from __future__ import annotations

from sqale_desktop.core.child.forks import WarmStep
from sqale_desktop.core.child.launch import child_command, child_env, is_frozen, run_child
from sqale_desktop.core.child.messages import Endpoint, Message, serve
from sqale_desktop.core.child.supervise import (
    KILL_GRACE_S,
    ChildDied,
    ChildFailed,
    ChildStopped,
    ChildTimedOut,
    children_cpu_s,
    discard_spares,
    memory_limit_mb,
    run,
    set_memory_limit_mb,
    start_ahead,
    wait_warm,
)

__all__ = [
    "KILL_GRACE_S",
    "ChildDied",
    "ChildFailed",
    "ChildStopped",
    "ChildTimedOut",
    "Endpoint",
    "Message",
    "WarmStep",
    "child_command",
    "child_env",
    "children_cpu_s",
    "discard_spares",
    "is_frozen",
    "memory_limit_mb",
    "run",
    "run_child",
    "serve",
    "set_memory_limit_mb",
    "start_ahead",
    "wait_warm",
]
