"""A device's lock across threads and processes: one candidate (or reference) runs or is timed on a GPU at a time,
also when several evaluators share it (threads of one process, other processes, another kbench run on the
machine), so no timing overlaps someone else's kernels; the CPU's lock (``cpu_lock_path``) does the same for the
host's timing cores.

The lock is an ``flock`` on ``gpu-<uuid>.lock`` in the host's lock folder (``host_lock_dir``: the temporary
folder's ``kbench-locks``, whatever a process's cache folder, so two runs with their own caches still take turns),
named by the GPU's UUID (the same physical GPU is ``cuda:0`` in one process and ``cuda:3`` in another, depending
on CUDA_VISIBLE_DEVICES). The folder is open to every user (sticky, like the temporary folder) and a lock file to
every user's processes, as the device is. Where the lock file cannot be had, it degrades to this process's lock.

With ``KBENCH_DEVICE_HOLD_LOG`` set to a file, every hold of a lock file is appended to it as one JSON line when it
ends (lock file, mode, pid, start and end on CLOCK_MONOTONIC, which all processes of the machine share), so that a
run can show afterwards that no exclusive hold overlapped another hold of the same GPU (bench/hold_overlap.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import torch

from kbench_env.config import environ
from kbench_env.machine import interpreter
from kbench_env.machine.device import Device


def gpu_identity(device: str) -> str:
    """The physical GPU behind ``device`` ("cuda" or "cuda:N"): its UUID where torch reports it, else the index
    with CUDA_VISIBLE_DEVICES (``cuda:0`` is another card in a process that sees other devices)."""
    index = Device.parse(device).index
    if index is None:
        index = torch.cuda.current_device()
    try:
        return str(torch.cuda.get_device_properties(index).uuid)
    except (AttributeError, RuntimeError, AssertionError):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_") or "none"
        return f"{visible}-{index}"


def log_hold(path, mode: str, start_ns: int) -> None:
    """Append one hold of the lock file ``path`` to ``$KBENCH_DEVICE_HOLD_LOG`` (unset: nothing). One ``write`` of
    an ``O_APPEND`` file per line, so the lines of concurrent processes do not interleave."""
    log = environ.get("KBENCH_DEVICE_HOLD_LOG")
    if not log or path is None:
        return
    line = json.dumps({"lock": str(path), "mode": mode, "pid": os.getpid(), "thread": threading.get_ident(),
                       "start_ns": start_ns, "end_ns": time.monotonic_ns()}) + "\n"
    try:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # a diagnostic: a lock is never refused for want of its log


def host_lock_dir() -> Path:
    """The host's folder of device lock files: one for every kbench process on the machine, whatever its cache
    folder (``KBENCH_CACHE``), since the devices are the host's."""
    return Path(tempfile.gettempdir()) / "kbench-locks"


def cpu_lock_path() -> Path:
    """The CPU's lock file: one for the host. Every kbench process on the machine times on the same cores (the last
    ones, sandbox/placement.py), its timed blocks' threads real-time there, so another process's timing on them
    would starve this one's workers (a stop that never completes) and be measured beside it."""
    return host_lock_dir() / "cpu.lock"


def gpu_lock_path(device: str) -> Path:
    """The lock file of ``device``, named by ``gpu_identity``, in the host's folder: another process's timing on
    the same card waits for this one's, whatever either's cache folder."""
    name = f"gpu-{gpu_identity(device)}"
    return host_lock_dir() / f"{''.join(c if c.isalnum() or c in '-_' else '_' for c in name)}.lock"


def open_shared_file(path: Path) -> int:
    """``path`` opened for reading and writing, made (with its folder) where missing, both open to every user where
    this process owns them: a lock that another user's process could not open would not keep that process out."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        st = os.stat(path.parent)
        if st.st_uid == os.geteuid() and st.st_mode & 0o7777 != 0o1777:
            os.chmod(path.parent, 0o1777)  # anyone may add a lock file, only its owner remove it (as in /tmp)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    with contextlib.suppress(OSError):
        st = os.fstat(fd)
        if st.st_uid == os.geteuid() and st.st_mode & 0o666 != 0o666:
            os.fchmod(fd, 0o666)  # (the umask took write access from the others)
    return fd


#: The longest a holder of a device lock waits for it by default (seconds), past which the wait ends in
#: DeviceWaitTimeout rather than go on: every hold is bounded by the timeouts of the work done under it (each
#: exchange with a worker has its own), so a wait this long means a hold that was never let go, not a long queue
#: (16 candidates in flight, each holding the device for at most its run and timing timeouts, wait far less).
WAIT_S = 3600.0
#: How often a wait with a deadline tries another process's file lock again (seconds): a blocking ``flock`` cannot
#: be given one.
FILE_POLL_S = 0.002


class DeviceWaitTimeout(TimeoutError):
    """A device lock not free within its deadline (WAIT_S by default)."""


def flock_by(fd: int, op: int, deadline: float) -> bool:
    """``flock(fd, op)`` tried until ``deadline`` (time.monotonic): True once taken, False if still held then."""
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(FILE_POLL_S, left))


class DeviceLock:
    """``threading.Lock``-like (``acquire``, ``release``, context manager) lock held across processes.

    ``path`` is the lock file, or a callable that returns it (resolved on first use: finding a GPU's UUID
    initialises CUDA, which should not happen before it is needed).
    """

    def __init__(self, path):
        self._thread = threading.Lock()
        self._path = path
        self._fd: int | None = None
        self._failed = False
        self._file: str | None = None  # the lock file, once opened (named in the hold log)
        self._since_ns = 0

    def _open(self) -> int | None:
        if self._fd is None and not self._failed:
            try:
                path = Path(self._path() if callable(self._path) else self._path)
                self._fd = open_shared_file(path)
                self._file = str(path)
            except Exception:  # noqa: BLE001 - no lock file: this process's lock still holds
                self._failed = True
        return self._fd

    def _lock_file(self, op: int, blocking: bool, deadline: float | None = None) -> bool:
        """``flock`` the file with ``op`` (LOCK_EX or LOCK_SH); False only when not ``blocking`` and it is held, or
        when it is still held at ``deadline`` (time.monotonic; None: no deadline). Without a lock file, or when the
        file lock fails, this process's lock alone holds: True."""
        fd = self._open()
        if fd is None:
            return True
        try:
            if blocking and deadline is not None:
                return flock_by(fd, op, deadline)
            fcntl.flock(fd, op if blocking else op | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:
            self._failed = True
        return True

    def _unlock_file(self) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            except OSError:
                pass

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock; False when not ``blocking`` and it is held, or when it is still held ``timeout`` seconds
        later (None: no deadline, for callers that bound the wait themselves)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._thread.acquire(blocking, -1 if deadline is None or not blocking else max(0.0, timeout)):
            return False
        if not self._lock_file(fcntl.LOCK_EX, blocking, deadline):
            self._thread.release()
            return False
        self._since_ns = time.monotonic_ns()
        interpreter.hold_started()
        return True

    def release(self) -> None:
        log_hold(self._file, "exclusive", self._since_ns)  # before the unlock: the logged hold covers the real one
        interpreter.hold_ended()
        self._unlock_file()
        self._thread.release()

    def __enter__(self):
        if not self.acquire(timeout=WAIT_S):
            raise DeviceWaitTimeout(f"the device lock {self._file or ''} was not free within {WAIT_S:.0f} s")
        return self

    def __exit__(self, *exc) -> None:
        self.release()
