"""How an evaluation holds its device for the stages that run candidate code on it (check, timing,
plausibility), and the lock it holds: by default one candidate at a time from its checks to the end of its timing;
with the Evaluator's ``shared_checks``, the checks shared with other candidates' checks and the timing and
plausibility alone (machine/shared_device_lock.py). Either way no timing overlaps other work on the device that
goes through the lock, in this process or another.
"""

from __future__ import annotations

import os
import threading
import time

from kbench_env.machine.device import Device
from kbench_env.machine.device_lock import DeviceLock, gpu_lock_path, log_hold
from kbench_env.pipeline.check import check
from kbench_env.pipeline.plausibility import plausibility
from kbench_env.pipeline.result import EvalResult, phase
from kbench_env.pipeline.timing import is_paired, judge_deferred, time_stage
from kbench_env.machine.shared_device_lock import SharedDeviceLock
from kbench_env.tasks.task import Config, Task


def shared_checks_setting(setting, device: str) -> bool:
    """Whether an evaluator on ``device`` shares the device between checks: ``setting`` (True/False) if given,
    else ``KBENCH_SHARED_CHECKS`` (0 or 1), else on for GPUs and off on the CPU. On a GPU the checks of several
    candidates run as separate processes on the device while timing holds it alone (the hold log shows no timing
    overlapping anything that goes through the lock); on the CPU a check's threads would take the cores that the
    timing of another candidate is measured on (the CPU's timing stops every other worker instead), so the CPU
    keeps one candidate at a time."""
    if setting is None:
        env = os.environ.get("KBENCH_SHARED_CHECKS", "")
        setting = env == "1" if env in ("0", "1") else Device.parse(device).is_cuda
    return bool(setting)


#: The CPU's lock, one per process whichever Evaluator holds it, in either mode (exclusive holds without
#: ``shared_checks``): while one evaluation times, every other evaluation's worker in the process is stopped
#: (quiet.py), which is safe only while none of them is being checked.
CPU_LOCK = SharedDeviceLock(None)


def make_device_lock(device: str, lock_dir, shared_checks: bool):
    """``(lock, slots)`` for an evaluator on ``device``: on a GPU a lock across processes too (machine/device_lock.py), on
    the CPU this process's, shared by its Evaluators (``CPU_LOCK``). ``slots`` (shared_checks only, else None)
    bounds the candidates between the start of their checks and the end of their timing, so that what they keep on
    the device while waiting for the timing (inputs, reference modules, the worker's state) is bounded as well as
    the checks running at once."""
    path = (lambda: gpu_lock_path(lock_dir, device)) if Device.parse(device).is_cuda else None
    if path is None:
        return CPU_LOCK, (threading.BoundedSemaphore(CPU_LOCK.max_shared + 1) if shared_checks else None)
    if not shared_checks:
        return DeviceLock(path), None
    lock = SharedDeviceLock(path)
    # as many again as may check at once: checked candidates queued for their timing (the queue that keeps the
    # device's timing fed) and timed ones whose read outputs wait to be judged (deferred_checks.py)
    return lock, threading.BoundedSemaphore(2 * lock.max_shared)


def device_stages(ev, task: Task, configs: list[Config], seed: int, worker, result: EvalResult) -> None:
    """Check, then (if correct and timed) time and judge plausibility, holding ``ev``'s device lock as its mode
    says; torch's thread count in this process lowered while holding it (``ev._trusted_threads``)."""
    if ev.shared_checks:
        _shared_checks_then_timing(ev, task, configs, seed, worker, result)
        return
    with phase(result, "device_wait"):
        t0 = time.monotonic_ns()
        ev._device_lock.acquire()
        _log_wait(ev._device_lock, t0)
    try:
        with ev._trusted_threads():
            with phase(result, "check"):
                prepared = check(ev, task, configs, seed, worker, result)
            if not result.correct or not ev.time_candidates:
                return
            judge_deferred(_timed_stages(ev, task, configs, prepared, seed, worker, result), result)
    finally:
        ev._device_lock.release()


def _shared_checks_then_timing(ev, task: Task, configs: list[Config], seed: int, worker, result: EvalResult) -> None:
    """The checks hold the device shared (waiting in phase ``check_wait``), and so does the start and first run of
    the reference's worker when its timing is not cached (``reference_prepare``: torch.compile's compile is
    seconds of host work); then timing and plausibility hold it exclusive (waiting in ``device_wait``)."""
    lock = ev._device_lock
    with phase(result, "check_wait"):
        t0 = time.monotonic_ns()
        ev._device_slots.acquire()
        lock.acquire(shared=True)
        _log_wait(lock, t0)
    try:
        try:
            with ev._trusted_threads(), phase(result, "check"):
                prepared = check(ev, task, configs, seed, worker, result)
            if result.correct and ev.time_candidates and not is_paired(ev):
                with phase(result, "reference_prepare"):  # the reference's start and runs, beside others' checks
                    ev.baselines.prepare(task, configs, prepared)
        finally:
            lock.release()
        if not result.correct or not ev.time_candidates:
            return
        with phase(result, "device_wait"):
            t0 = time.monotonic_ns()
            lock.acquire()
            _log_wait(lock, t0)
        try:
            with ev._trusted_threads():
                deferred = _timed_stages(ev, task, configs, prepared, seed, worker, result)
        finally:
            lock.release()
        if deferred:  # the timed outputs read and kept: judged beside others' checks (deferred_checks.py)
            with phase(result, "check_wait"):
                t0 = time.monotonic_ns()
                lock.acquire(shared=True)
                _log_wait(lock, t0)
            try:
                with ev._trusted_threads():
                    judge_deferred(deferred, result)
            finally:
                lock.release()
    finally:
        ev._device_slots.release()


def _log_wait(lock, start_ns: int) -> None:
    """A candidate's wait for the device, into the hold log (device_lock.log_hold, mode "wait"; nothing without
    KBENCH_DEVICE_HOLD_LOG or a lock file): the device idle while a candidate waits is what a run wants to know
    (bench/hold_overlap.py)."""
    log_hold(getattr(lock, "_file", None), "wait", start_ns)


def _timed_stages(ev, task: Task, configs: list[Config], prepared: dict, seed: int, worker,
                  result: EvalResult) -> list:
    """Timing (the reference's too) and plausibility, while the evaluation holds the device alone. Returns the
    timings whose read outputs are still to be judged (timing.judge_deferred)."""
    deferred = time_stage(ev, task, configs, prepared, seed, worker, result)
    if result.stage == "timed" and not result.integrity_flags:
        with phase(result, "plausibility"):
            plausibility(ev, task, configs, prepared, seed, worker, result)
    return deferred
