"""How an evaluation holds its device for the stages that run candidate code on it (check, timing,
plausibility), and the lock it holds: by default one candidate at a time from its checks to the end of its timing;
with the Evaluator's ``shared_checks``, the checks shared with other candidates' checks and the timing and
plausibility alone (machine/shared_device_lock.py). Either way no timing overlaps other work on the device that
goes through the lock, in this process or another.
"""

from __future__ import annotations

import contextlib
import threading
import time

from kbench_env.machine.device import Device
from kbench_env.machine.device_lock import WAIT_S, DeviceLock, cpu_lock_path, gpu_lock_path, log_hold
from kbench_env.machine.shared_device_lock import SharedDeviceLock
from kbench_env.pipeline.result import EvalResult, phase
from kbench_env.pipeline.threads import trusted_threads
from kbench_env.sandbox.diagnosis import WorkerError


def shared_checks_setting(setting, device: str) -> bool:
    """Whether an evaluator on ``device`` shares the device between checks: ``setting`` (True/False) if given
    (``KBENCH_SHARED_CHECKS``, 0 or 1, is the setting of an EvaluatorConfig made without one), else on for GPUs
    and off on the CPU. On a GPU the checks of several
    candidates run as separate processes on the device while timing holds it alone (the hold log shows no timing
    overlapping anything that goes through the lock); on the CPU a check's threads would take the cores that the
    timing of another candidate is measured on (the CPU's timing stops every other worker instead), so the CPU
    keeps one candidate at a time."""
    if setting is None:
        setting = Device.parse(device).is_cuda
    return bool(setting)


#: The CPU's lock, one object per process whichever Evaluator holds it, in either mode (exclusive holds without
#: ``shared_checks``): while one evaluation times, every other evaluation's worker in the process is stopped
#: (quiet.py), which is safe only while none of them is being checked. Its file lock is the host's
#: (``cpu_lock_path``): another kbench process's evaluations wait too, rather than run their real-time timed blocks
#: on the same cores, where neither process's workers could be stopped while the other's run.
CPU_LOCK = SharedDeviceLock(cpu_lock_path)


def make_device_lock(device: str, shared_checks: bool):
    """``(lock, slots)`` for an evaluator on ``device``: on a GPU a lock across the host's processes too (its file in
    machine/device_lock.host_lock_dir), on the CPU the host's, one object for this process's Evaluators
    (``CPU_LOCK``). ``slots`` (shared_checks only, else None) bounds the candidates between the start of their
    checks and the end of their timing, so that what they keep on the device while waiting for the timing (inputs,
    reference modules, the worker's state) is bounded as well as the checks running at once."""
    path = (lambda: gpu_lock_path(device)) if Device.parse(device).is_cuda else None
    if path is None:
        return CPU_LOCK, (threading.BoundedSemaphore(CPU_LOCK.max_shared + 1) if shared_checks else None)
    if not shared_checks:
        return DeviceLock(path), None
    lock = SharedDeviceLock(path)
    # as many again as may check at once: checked candidates queued for their timing (the queue that keeps the
    # device's timing fed) and timed ones whose read outputs wait to be judged (deferred_checks.py)
    return lock, threading.BoundedSemaphore(2 * lock.max_shared)


class DeviceHold:
    """How one evaluation holds its evaluator's device: ``checks``, ``timing`` and ``judging`` are its three holds,
    entered in that order by the stage order (evaluator.py); used as a context manager around them, it lets go of
    whatever is still held at its end. Without shared checks (``slots`` None) the first of them takes the lock
    alone and keeps it to the end, the other two find it held; with them, the checks hold it shared (and one of
    ``slots``, kept to the end), the timing alone, and the judging of kept outputs shared again. ``threads()``
    lowers torch's thread count in this process while a stage holds the device (threads.trusted_threads)."""

    def __init__(self, lock, slots, device: str, worker_threads: int):
        self.lock, self.slots, self.device, self.worker_threads = lock, slots, device, worker_threads
        self.shared = slots is not None
        self._exclusive = self._slot = False
        self._checking = False  # the checks' shared hold is held now (not while stepped aside)

    def __enter__(self) -> DeviceHold:
        return self

    def __exit__(self, *exc) -> None:
        if self._exclusive:
            self._exclusive = False
            self.lock.release()
        if self._slot:
            self._slot = False
            self.slots.release()

    def threads(self):
        return trusted_threads(self.device, self.worker_threads)

    @contextlib.contextmanager
    def checks(self, result: EvalResult):
        """The checks' hold: alone (waiting in phase ``device_wait``), kept to the end; or shared with other
        candidates' checks (waiting in ``check_wait``), let go at the end of the block."""
        if not self.shared:
            self._acquire(result, "device_wait", shared=False)
            self._exclusive = True
            yield
            return
        with phase(result, "check_wait"):
            t0 = time.monotonic_ns()
            if not self.slots.acquire(timeout=WAIT_S):
                raise _not_free(self.lock, "a place among the candidates being checked")
            self._slot = True
            _take(self.lock, shared=True)
            self._checking = True
            _log_wait(self.lock, t0)
        try:
            yield
        finally:
            if self._checking:  # (a step aside whose wait ended in an error holds nothing: releasing would end
                self._checking = False  # another holder's share of the lock in its place)
                self.lock.release()

    @contextlib.contextmanager
    def timing(self, result: EvalResult):
        """The device alone for the block (timing and plausibility): held already without shared checks."""
        if not self.shared:
            yield
            return
        self._acquire(result, "device_wait", shared=False)
        try:
            yield
        finally:
            self.lock.release()

    @contextlib.contextmanager
    def judging(self, result: EvalResult, deferred: list):
        """The hold for judging the timed outputs read and kept (deferred_checks.py): shared with other
        candidates' checks where there are any to judge, or still the timing's without shared checks."""
        if not (self.shared and deferred):
            yield
            return
        self._acquire(result, "check_wait", shared=True)
        try:
            yield
        finally:
            self.lock.release()

    def timing_waits(self) -> bool:
        """Under shared checks, whether another candidate's timing waits for the device (which waits for every
        check holding it to end: a check steps aside between two configurations rather than make it wait)."""
        return self.shared and getattr(self.lock, "exclusive_waiting", lambda: False)()

    def step_aside(self, result: EvalResult) -> None:
        """Let the waiting timing have the device, then hold it shared again (phase ``check_wait``)."""
        with phase(result, "check_wait"):
            self._checking = False
            self.lock.release()
            _take(self.lock, shared=True)
            self._checking = True

    def _acquire(self, result: EvalResult, waiting: str, shared: bool) -> None:
        with phase(result, waiting):
            t0 = time.monotonic_ns()
            _take(self.lock, shared=shared)
            _log_wait(self.lock, t0)


def _take(lock, shared: bool) -> None:
    """``lock`` held (shared or alone) within WAIT_S, or WorkerError: a hold of the device never let go."""
    if not (lock.acquire(shared=True, timeout=WAIT_S) if shared else lock.acquire(timeout=WAIT_S)):
        raise _not_free(lock, "the device")


def _not_free(lock, what: str) -> WorkerError:
    where = getattr(lock, "_file", None) or "of this process"
    return WorkerError(f"{what} was not free within {WAIT_S:.0f} s (lock {where}): a hold that was never let go, "
                       "the evaluator's fault and not the candidate's; the candidate was not run further")


def _log_wait(lock, start_ns: int) -> None:
    """A candidate's wait for the device, into the hold log (device_lock.log_hold, mode "wait"; nothing without
    KBENCH_DEVICE_HOLD_LOG or a lock file): the device idle while a candidate waits is what a run wants to know
    (bench/hold_overlap.py)."""
    log_hold(getattr(lock, "_file", None), "wait", start_ns)

