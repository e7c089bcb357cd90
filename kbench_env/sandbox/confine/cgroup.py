"""Process bookkeeping of a worker: a pids cgroup per worker where kbench runs as root (a process limit that
holds for uid 0, and a complete list of what to kill), with a freezer cgroup of the same name beside it (the stop
that no process of the worker escapes: freeze_group.py), and the kill of a whole session where no cgroup is at
hand. The worker (sandbox/worker_process.py) decides when; this module only knows how."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid

from kbench_env.sandbox.confine.freeze_group import FreezeGroup


class PidsCgroup:
    """A pids cgroup per worker (root only): a process limit that holds for uid 0 and a complete kill list."""

    _base: tuple | None = None  # (path of kbench's parent cgroup, version), detected once
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
        if os.geteuid() != 0:
            return None
        try:
            with open("/proc/self/mountinfo") as f:
                mounts = [line.split() for line in f]
        except OSError:
            return None
        for m in mounts:  # cgroup v1 with the pids controller
            sep = m.index("-")
            if m[sep + 1] == "cgroup" and "pids" in m[sep + 3].split(","):
                return cls._prepare(os.path.join(m[4], "kbench"), 1)
        for m in mounts:  # cgroup v2 with pids enabled for children of the root
            sep = m.index("-")
            if m[sep + 1] == "cgroup2":
                try:
                    with open(os.path.join(m[4], "cgroup.subtree_control")) as f:
                        if "pids" not in f.read().split():
                            continue
                except OSError:
                    continue
                return cls._prepare(os.path.join(m[4], "kbench"), 2)
        return None

    @staticmethod
    def _prepare(path: str, version: int) -> tuple | None:
        try:
            os.makedirs(path, exist_ok=True)
            if version == 2:
                with open(os.path.join(path, "cgroup.subtree_control"), "w") as f:
                    f.write("+pids")
            now = time.time()
            for e in os.scandir(path):  # groups left by killed parents (an hour old, empty)
                if e.is_dir(follow_symlinks=False) and now - e.stat().st_mtime > 3600:
                    with contextlib.suppress(OSError):
                        os.rmdir(e.path)
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
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    st = f.read()
                fields = st[st.rindex(")") + 2 :].split()
                if int(fields[3]) == sid and fields[0] not in "ZX":
                    os.kill(int(name), signal.SIGKILL)
                    found = True
            except (OSError, ValueError, IndexError):
                continue
        if not found:
            return
        time.sleep(0.005)
