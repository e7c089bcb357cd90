"""What the pids cgroup (cgroup.py) and the freezer cgroup (freeze_group.py) both need of the cgroup file systems:
the mounted hierarchies, kbench's directory found once per process, and the sweep of groups killed parents left."""

from __future__ import annotations

import contextlib
import os
import threading
import time

#: An empty group this old under kbench's directory belonged to a parent that was killed before it removed it.
STALE_S = 3600


class DetectedOnce:
    """A class whose ``base()`` (kbench's directory in its hierarchy and the version, or None) is found once by
    ``_detect`` and kept; subclasses set their own ``_base`` and ``_detected``."""

    _base: tuple | None = None
    _detected = False
    _lock = threading.Lock()

    @classmethod
    def base(cls) -> tuple | None:
        with cls._lock:
            if not cls._detected:
                cls._detected = True
                cls._base = cls._detect()
        return cls._base

    @classmethod
    def _detect(cls) -> tuple | None:
        raise NotImplementedError


def cgroup_mounts() -> list[tuple[str, str, list[str]]]:
    """``(file system type, mount point, super options)`` of every mount of this process, where it runs as root
    (nothing else may make cgroups); [] otherwise or where mountinfo cannot be read."""
    if os.geteuid() != 0:
        return []
    try:
        with open("/proc/self/mountinfo") as f:
            rows = [line.split() for line in f]
    except OSError:
        return []
    out = []
    for m in rows:
        sep = m.index("-")
        out.append((m[sep + 1], m[4], m[sep + 3].split(",")))
    return out


def sweep_stale(path: str) -> None:
    """Remove the empty groups under ``path`` older than STALE_S (a group still in use is not empty: rmdir fails)."""
    now = time.time()
    for e in os.scandir(path):
        if e.is_dir(follow_symlinks=False) and now - e.stat().st_mtime > STALE_S:
            with contextlib.suppress(OSError):
                os.rmdir(e.path)
