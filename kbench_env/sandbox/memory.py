"""The trusted side's hands on a worker process: freeze and thaw it, and read and write its memory while it is frozen.

The timing of a CPU candidate (pipeline/blocks.py) writes each block's inputs into the worker's input buffers and
reads the block's outputs out of the worker's memory itself, through ``/proc/<pid>/mem``, with every task of the
worker stopped, so that nothing the candidate runs can see an input before its block starts or finish an output
after the block has reported done. The stop is the worker's freezer cgroup where there is one (confine/freeze_group.py:
every task of the cgroup as one, confirmed by the kernel); else SIGSTOP to the worker's process group, which every
process the worker starts stays in (its seccomp filter refuses setsid and setpgid) and which none of them can undo
(the filter refuses sending SIGCONT, and CLONE_VM processes outside the thread group). What the worker says about where its buffers are is
only a pointer: a wrong one reads memory that does not hold the right answer, which the comparison catches.

Reading another process's memory needs the same rights as ptrace: the worker is this process's descendant and
stays dumpable (confine/privileges.py); a worker that makes itself undumpable, or names an address it has not
mapped, makes the read fail, and the evaluation fails with it.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import signal
import time

from kbench_env.sandbox.confine.freeze_group import FreezeGroup, FreezeTimeout
from kbench_env.sandbox.confine.libc import err, libc

_PIDFD_GETFD = 438  # the same number on x86_64 and aarch64

#: How long ``freeze`` waits for every thread to stop before it gives up (a thread in uninterruptible sleep).
FREEZE_TIMEOUT_S = 10.0
#: How long the freeze's wait sleeps between two looks at a stopping worker's threads (seconds).
FREEZE_NAP_S = 50e-6
#: ``Freezer.settle``: how long it waits at most for stopped threads to be off their CPUs, and how often it looks.
SETTLE_TIMEOUT_S, SETTLE_POLL_S = 0.02, 50e-6


class MemoryError_(OSError):
    """The worker's memory could not be read or written at an address it named."""


class ProcessMemory:
    """Read and write the memory of process ``pid`` (``/proc/<pid>/mem``, opened once), and, once ``share``d, the
    worker's input buffers through this side's own mapping of the memfd they are on."""

    def __init__(self, pid: int):
        self.pid = pid
        self._fd = os.open(f"/proc/{pid}/mem", os.O_RDWR)
        self._window = None  # (base address in the worker, size, this side's mapping) of its input memfd

    def share(self, fd, base, size) -> bool:
        """Write what falls in the worker's ``size`` bytes at ``base`` through its memfd (``fd`` in its table,
        which it says it mapped there; taken with pidfd_getfd: the same open file, no rights of this side's added)
        mapped here: a copy at memory speed where /proc/<pid>/mem takes several times as long on large inputs.
        Taken only from a memfd of ordinary pages sealed against shrinking (this side's mapping cannot fault) and
        as large as said; False otherwise (writes go through /proc/<pid>/mem). A mapping that is not where the
        worker said only feeds its calls inputs that are not theirs, which the comparison catches."""
        self.unshare()
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (fd, base, size)) or not size:
            return False
        try:
            own = _take_fd(self.pid, fd)
        except OSError:
            return False
        try:
            st = os.fstat(own)  # (a huge-page memfd's page, touched here, can fail to come: refused too)
            if not os.readlink(f"/proc/self/fd/{own}").startswith("/memfd:") or st.st_size < size \
                    or st.st_blksize > mmap.PAGESIZE or not fcntl.fcntl(own, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK:
                return False
            self._window = (base, size, mmap.mmap(own, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE))
            return True
        except (OSError, ValueError, OverflowError):
            return False
        finally:
            os.close(own)

    def unshare(self) -> None:
        if self._window is not None:
            self._window[2].close()
            self._window = None

    def read(self, address: int, n: int) -> bytes:
        if n == 0:
            return b""
        try:
            data = os.pread(self._fd, n, address)
        except OSError as exc:
            raise MemoryError_(f"reading {n} bytes at {address:#x} of the worker failed: {exc.strerror}") from None
        if len(data) != n:
            raise MemoryError_(f"reading {n} bytes at {address:#x} of the worker returned {len(data)}")
        return data

    def write(self, address: int, data) -> None:
        view = memoryview(data).cast("B")
        if self._window is not None and 0 <= address - self._window[0] <= self._window[1] - len(view):
            at = address - self._window[0]
            self._window[2][at:at + len(view)] = view
            return
        done = 0
        while done < len(view):
            try:
                done += os.pwrite(self._fd, view[done:], address + done)
            except OSError as exc:
                raise MemoryError_(f"writing {len(view)} bytes at {address:#x} of the worker failed: "
                                   f"{exc.strerror}") from None

    def close(self) -> None:
        self.unshare()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _take_fd(pid: int, fd: int) -> int:
    """A copy of file descriptor ``fd`` of process ``pid`` in this one (pidfd_getfd: ptrace's rights, as
    /proc/<pid>/mem needs)."""
    pidfd = os.pidfd_open(pid)
    try:
        got = libc.syscall(_PIDFD_GETFD, pidfd, fd, 0)
        if got < 0:
            raise OSError(ctypes.get_errno(), err("pidfd_getfd"))
        return got
    finally:
        os.close(pidfd)


def _run_ns(pids: list[int]) -> int:
    """The nanoseconds the threads of ``pids`` have run (each thread's /proc schedstat, summed)."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # the thread ended
    return total


def _thread_states(pid: int) -> list[str]:
    states = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return states
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended
        states.append(chr(stat[stat.rindex(b")") + 2]))
    return states


class Freezer:
    """Stops and resumes every task of a worker: its process group by signal, ``pids()`` naming the processes to
    wait for (the worker, and where its pids cgroup lists them, confine/cgroup.py, every process it started); and
    with ``group`` (its freezer cgroup, confine/freeze_group.py) the cgroup frozen as one, which nothing of the worker
    escapes (a process that left the group, or changes pid faster than the list is read)."""

    def __init__(self, pid: int, cgroup_procs: str | None = None, group: FreezeGroup | None = None):
        self.pid = pid
        self.cgroup_procs = cgroup_procs
        self.group = group
        self.frozen = False

    def pids(self) -> list[int]:
        if self.cgroup_procs:
            try:
                with open(self.cgroup_procs) as f:
                    return [int(x) for x in f.read().split()] or [self.pid]
            except OSError:
                pass
        return [self.pid]

    def _signalled(self) -> list[int]:
        """The processes stopped by signal and waited for: with a freezer cgroup the worker alone (the cgroup
        holds the rest, and reading the pids cgroup's list took milliseconds at times on a loaded machine);
        without, every process ``pids()`` names."""
        return [self.pid] if self.group is not None else self.pids()

    def freeze(self) -> None:
        """Stop every task of the worker and return once they all are: SIGSTOP to the process group (and to every
        process ``_signalled`` names) until every thread of them is seen stopped, then, where the worker has a
        freezer cgroup, the cgroup frozen until the kernel says every task of it is (those the signal did not
        reach included). Raises MemoryError_ if that has not happened within ``FREEZE_TIMEOUT_S``.

        The signal comes first for speed alone: the kernel reports a cgroup frozen about a scheduler tick late
        when its tasks are still running (3.0 ms median on a loaded 2-core VM) but at once when they are stopped
        already (a fraction of a millisecond for both steps)."""
        os.killpg(self.pid, signal.SIGSTOP)
        self.frozen = True
        pids = self._signalled()
        for pid in pids:
            if pid != self.pid:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + FREEZE_TIMEOUT_S
        for pid in pids:
            while any(s not in "Tt" for s in _thread_states(pid) if s not in "ZX"):
                if time.monotonic() > deadline:
                    raise MemoryError_(f"the worker's process {pid} did not stop within {FREEZE_TIMEOUT_S:.0f} s")
                # a real sleep, not a yield: a stopping thread must run to stop, and this one is on its core
                # (a pairing's clock thread, real-time where allowed: placement.py), where a yield gives it nothing
                time.sleep(FREEZE_NAP_S)
        if self.group is not None:
            try:
                self.group.freeze(max(0.0, deadline - time.monotonic()))
            except FreezeTimeout as exc:
                raise MemoryError_(str(exc)) from None

    def settle(self, timeout: float = SETTLE_TIMEOUT_S) -> None:
        """Return once the stopped worker's threads are off their CPUs: a thread already seen stopped is still
        switching out for some tens of microseconds, its run time growing meanwhile. Read until that time stops
        growing (at most ``timeout``: the stop is done, this waits for its tail only). For a stop that a block of
        another worker follows (outside any clock): that block then has the cores to itself from its start."""
        deadline, last = time.monotonic() + timeout, None
        while True:
            now = _run_ns(self._signalled())
            if now == last or time.monotonic() > deadline:
                return
            last = now
            time.sleep(SETTLE_POLL_S)

    def thaw(self) -> None:
        """Resume the worker: SIGCONT (a task of a frozen cgroup stays frozen), then the cgroup thawed."""
        for pid in self._signalled():
            if pid != self.pid:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        os.killpg(self.pid, signal.SIGCONT)
        if self.group is not None:
            self.group.thaw()
        self.frozen = False
