"""Process bookkeeping of a worker: a pids cgroup per worker where kbench runs as root (a process limit that
holds for uid 0, and a complete list of what to kill), with a freezer cgroup of the same name beside it (the stop
that no process of the worker escapes: freeze_group.py), and the kill of a whole session where no cgroup is at
hand. The worker (sandbox/worker_process.py) decides when; this module only knows how."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid

from kbench_env.sandbox.confine.cgroup_fs import DetectedOnce, cgroup_mounts, sweep_stale
from kbench_env.sandbox.confine.freeze_group import FreezeGroup
from kbench_env.sandbox.confine.proc_table import processes


class PidsCgroup(DetectedOnce):
    """A pids cgroup per worker (root only): a process limit that holds for uid 0 and a complete kill list."""

    _base: tuple | None = None  # (path of kbench's parent cgroup, version), detected once
    _detected = False

    @classmethod
    def _detect(cls) -> tuple | None:
        mounts = cgroup_mounts()
        for kind, mount, options in mounts:  # cgroup v1 with the pids controller
            if kind == "cgroup" and "pids" in options:
                return cls._prepare(os.path.join(mount, "kbench"), 1)
        for kind, mount, _ in mounts:  # cgroup v2 with pids enabled for children of the root
            if kind == "cgroup2":
                try:
                    with open(os.path.join(mount, "cgroup.subtree_control")) as f:
                        if "pids" not in f.read().split():
                            continue
                except OSError:
                    continue
                return cls._prepare(os.path.join(mount, "kbench"), 2)
        return None

    @staticmethod
    def _prepare(path: str, version: int) -> tuple | None:
        try:
            os.makedirs(path, exist_ok=True)
            if version == 2:
                with open(os.path.join(path, "cgroup.subtree_control"), "w") as f:
                    f.write("+pids")
            sweep_stale(path)
            return path, version
        except OSError:
            return None

    def __init__(self, max_pids: int):
        base = self.base()
        if base is None:
            raise OSError("no pids cgroup")
        self.path = os.path.join(base[0], uuid.uuid4().hex[:16])
        self.version = base[1]
        os.mkdir(self.path)
        try:
            with open(os.path.join(self.path, "pids.max"), "w") as f:
                f.write(str(int(max_pids)))
        except OSError:
            os.rmdir(self.path)
            raise
        # the stop of the worker as one: in a v2 hierarchy its own cgroup freezes; else a cgroup of the same name
        # in a v2 hierarchy beside (a hybrid system) or in v1's freezer controller; None where there is none
        if self.version == 2 and os.path.exists(os.path.join(self.path, "cgroup.freeze")):
            self.freezer: FreezeGroup | None = FreezeGroup(self.path, 2)
        else:
            self.freezer = FreezeGroup.make(os.path.basename(self.path))

    @property
    def hierarchies(self) -> int:
        """In how many cgroup hierarchies the worker is put (what it waits for before it goes on)."""
        return 1 if self.freezer is None or self.freezer.path == self.path else 2

    def pids(self) -> list:
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                return [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            return []

    def signal_all(self) -> None:
        """SIGKILL every process in the cgroup, without waiting for them to go."""
        if self.version == 2 and os.path.exists(os.path.join(self.path, "cgroup.kill")):
            with contextlib.suppress(OSError), open(os.path.join(self.path, "cgroup.kill"), "w") as f:
                f.write("1")
        else:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        self._thaw()

    def _thaw(self) -> None:
        """A task killed while frozen by v1's freezer dies only once thawed."""
        if self.freezer is not None:
            with contextlib.suppress(OSError):
                self.freezer.thaw()

    def kill_all(self) -> None:
        if self.version == 2 and os.path.exists(os.path.join(self.path, "cgroup.kill")):
            with contextlib.suppress(OSError), open(os.path.join(self.path, "cgroup.kill"), "w") as f:
                f.write("1")
        self._thaw()
        for _ in range(200):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def add(self, pid: int) -> None:
        """Put ``pid`` in the freezer cgroup, then in the pids cgroup (the worker waits until it is in both:
        ``hierarchies``). A freezer cgroup that cannot take it is dropped: the stop falls back to signals."""
        if self.freezer is not None and self.freezer.path != self.path:
            try:
                self.freezer.add(pid)
            except OSError:
                self.freezer.remove()
                self.freezer = None
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(pid))

    def remove(self) -> None:
        if self.freezer is not None:
            if self.freezer.path != self.path:
                self.freezer.remove()
            else:
                self.freezer.close()
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:  # killed processes not reaped yet
                self.kill_all()
                time.sleep(0.01)


def kill_session(sid: int, rounds: int = 50) -> None:
    """Kill every process of session ``sid`` (the worker's: its seccomp filter refuses setsid(), so all its
    descendants stay in it, including compilers that ninja puts in process groups of their own). Used where no
    pids cgroup is at hand; a pid stays reserved while it names a live session, so nothing else is hit."""
    for _ in range(rounds):
        found = False
        for proc in processes():
            if proc.session == sid and proc.live:
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                    found = True
                except OSError:
                    continue
        if not found:
            return
        time.sleep(0.005)
