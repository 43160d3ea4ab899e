"""How many threads llama.cpp should use: one per physical core.

llama-cpp-python defaults to half of ``os.cpu_count()``, which on a machine without SMT (like a
2-vCPU cloud box) halves decode speed; on an SMT machine, one thread per *logical* core makes
threads fight for the same core.  Physical cores available to this process is the right number.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _linux_physical_cores(cpuinfo: str, allowed: set[int]) -> int:
    """Distinct (package, core) pairs among the logical CPUs this process may run on."""
    cores: set[tuple[str, str]] = set()
    processor, package, core = -1, "0", ""
    for line in [*cpuinfo.splitlines(), ""]:
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "processor":
            processor = int(value)
        elif key == "physical id":
            package = value
        elif key == "core id":
            core = value
        elif not key and processor >= 0:
            if processor in allowed:
                cores.add((package, core or str(processor)))
            processor, package, core = -1, "0", ""
    return len(cores)


def physical_cores() -> int:
    """Physical cores usable by this process (at least 1); falls back to logical CPUs when unknown."""
    try:
        allowed = os.sched_getaffinity(0)
    except AttributeError:
        allowed = set(range(os.cpu_count() or 1))
    logical = max(len(allowed), 1)
    if sys.platform.startswith("linux"):
        try:
            found = _linux_physical_cores(Path("/proc/cpuinfo").read_text(), allowed)
        except OSError:
            found = 0
        return max(1, min(found, logical)) if found else logical
    if sys.platform == "darwin":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "hw.perflevel0.physicalcpu"], capture_output=True, text=True, check=True
            )
            return max(1, int(out.stdout.strip()))
        except (OSError, ValueError, subprocess.CalledProcessError):
            return logical
    return logical
