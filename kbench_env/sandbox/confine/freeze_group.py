"""A cgroup that stops every task of a worker as one: cgroup v2's ``cgroup.freeze`` (any cgroup v2 hierarchy, a
hybrid system's ``unified`` one included: freezing needs no controller), else cgroup v1's freezer controller.

The trusted side stops the worker to write a timed block's inputs and read its outputs (sandbox/memory.py). Stopping
processes one by one from a pid list read before leaves a gap that a helper changing pid faster than the list is
read walks through (issue #34: a CLONE_VM helper escaped 111 of 174 stops). A freezer cgroup has no such gap: every
task in it, those it starts while the freeze goes on included, stops, and the kernel says when the last one has
(``cgroup.events``' ``frozen 1``, or v1's ``freezer.state`` reading ``FROZEN``). The worker cannot leave the
cgroup: it has no capability, and its mount namespace and Landlock make the cgroup files read-only to it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time


class FreezeTimeout(OSError):
    """The cgroup was not frozen within the deadline (a task in uninterruptible sleep, or a kernel that never
    reports it)."""


class FreezeGroup:
    """The freezer side of a worker's cgroup (``path``, ``version`` 1 or 2)."""

    _base: tuple | None = None  # (kbench's directory in a freezable hierarchy, version), detected once
    _detected = False
    _lock = threading.Lock()

    def __init__(self, path: str, version: int):
        self.path, self.version = path, version
        self._events = -1

    @classmethod
    def base(cls) -> tuple | None:
        with cls._lock:
            if not cls._detected:
                cls._detected = True
                cls._base = cls._detect()
        return cls._base

    @classmethod
    def _detect(cls) -> tuple | None:
        if os.geteuid() != 0:
            return None
        try:
            with open("/proc/self/mountinfo") as f:
                mounts = [line.split() for line in f]
        except OSError:
            return None
        found = []
        for m in mounts:
            sep = m.index("-")
            if m[sep + 1] == "cgroup2":
                found.append((0, m[4], 2))
            elif m[sep + 1] == "cgroup" and "freezer" in m[sep + 3].split(","):
                found.append((1, m[4], 1))
        for _, mount, version in sorted(found):  # v2 first
            path = os.path.join(mount, "kbench")
            try:
                os.makedirs(path, exist_ok=True)
            except OSError:
                continue
            if version == 2 and not _has_freeze(path):
                continue
            now = time.time()
            for e in os.scandir(path):  # groups left by killed parents (an hour old, empty)
                if e.is_dir(follow_symlinks=False) and now - e.stat().st_mtime > 3600:
                    with contextlib.suppress(OSError):
                        os.rmdir(e.path)
            return path, version
        return None

    @classmethod
    def make(cls, name: str) -> FreezeGroup | None:
        """A new freezable cgroup called ``name`` under kbench's directory, or None where none can be made."""
        base = cls.base()
        if base is None:
            return None
        path = os.path.join(base[0], name)
        try:
            os.mkdir(path)
        except OSError:
            return None
        return cls(path, base[1])

    def add(self, pid: int) -> None:
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(pid))

    def freeze(self, timeout: float) -> None:
        """Freeze every task of the cgroup and return once the kernel reports them all frozen; raises
        FreezeTimeout after ``timeout`` seconds."""
        self._write("1" if self.version == 2 else "FROZEN")
        deadline = time.monotonic() + timeout
        if self.version == 2:
            self._await_v2(deadline)
            return
        while True:  # v1: reading freezer.state completes the freeze of tasks that have stopped since
            with open(os.path.join(self.path, "freezer.state")) as f:
                if f.read().strip() == "FROZEN":
                    return
            if time.monotonic() > deadline:
                raise FreezeTimeout(f"the worker's cgroup {self.path} was not frozen within {timeout:.0f} s")
            time.sleep(0)

    def _await_v2(self, deadline: float) -> None:
        if self._events < 0:
            self._events = os.open(os.path.join(self.path, "cgroup.events"), os.O_RDONLY)
        while True:
            os.lseek(self._events, 0, os.SEEK_SET)
            if b"frozen 1" in os.read(self._events, 4096):
                return
            if time.monotonic() > deadline:
                raise FreezeTimeout(f"the worker's cgroup {self.path} was not frozen within the deadline "
                                    "(cgroup.events never said frozen 1)")
            time.sleep(0)  # (memory.Freezer stops the tasks by signal first: this loop is short)

    def thaw(self) -> None:
        self._write("0" if self.version == 2 else "THAWED")

    def _write(self, value: str) -> None:
        with open(os.path.join(self.path, "cgroup.freeze" if self.version == 2 else "freezer.state"), "w") as f:
            f.write(value)

    def close(self) -> None:
        """Thaw, and close what this side holds open."""
        with contextlib.suppress(OSError):
            self.thaw()
        if self._events >= 0:
            os.close(self._events)
            self._events = -1

    def remove(self) -> None:
        """Thaw (a v1 task killed while frozen dies only once thawed) and remove the cgroup once it is empty."""
        self.close()
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:  # killed processes not reaped yet
                time.sleep(0.01)


def _has_freeze(path: str) -> bool:
    """Whether cgroups under ``path`` have cgroup.freeze (kernel 5.2 and later): made and removed to see."""
    probe = os.path.join(path, ".probe-%d" % os.getpid())
    try:
        os.makedirs(probe, exist_ok=True)
        return os.path.exists(os.path.join(probe, "cgroup.freeze"))
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)
