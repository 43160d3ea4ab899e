"""Free-space check before a conversion: every byte it will write must fit, with a margin.

The hub cache, the work folder (intermediate GGUF) and the models folder may sit on different
disks, so requirements are summed per device and each device is checked on its own.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sqale_desktop.core.models.errors import NotEnoughDiskSpace
from sqale_desktop.core.models.files import DiskUsage
from sqale_desktop.core.units import format_bytes


def check_space(needs: dict[Path, int], margin: int, disk_usage: DiskUsage = shutil.disk_usage) -> None:
    """Raise NotEnoughDiskSpace unless each device has room for what goes to its folders."""
    per_device: dict[int, tuple[Path, int]] = {}
    for folder, size in needs.items():
        existing = _existing_parent(folder)
        device = os.stat(existing).st_dev
        path, total = per_device.get(device, (existing, 0))
        per_device[device] = (path, total + size)
    for path, total in per_device.values():
        free = disk_usage(str(path)).free
        if free < total + margin:
            raise NotEnoughDiskSpace(
                f"Converting needs {format_bytes(total + margin, 'GiB')} free on the disk holding {path}, "
                f"but only {format_bytes(free, 'GiB')} is free."
            )


def _existing_parent(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or ".")
