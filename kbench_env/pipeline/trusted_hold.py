"""The trusted side's shared hold of a device: a reference run ahead of its timing (reference_start.py), a compiled
reference's run (compile_later.py). It takes a place among the lock's trusted holders (SharedDeviceLock's
``trusted``), then, for a run ahead, the task's lock, and lets go of them in the reverse order. A compile lets the
hold go while inductor compiles and takes it again before the compiled graph runs (Baselines._run_reference,
worker/compile_gate.py): re-taking the device while still holding the task's lock would wait for a timing of the
same task that waits for that lock.

Every wait has a deadline: what is not had within ``timeout`` seconds (or by the time ``stopped`` says so) ends in
``HoldNotHad``, and the work is left for a candidate's own stage or a later ask. This work goes beside candidates',
never before them, so a device busy that long is not an error.
"""

from __future__ import annotations

import time

#: How often a hold with a ``stopped`` test tries the lock again (seconds): a blocking wait could not see it.
POLL_S = 0.05


class HoldNotHad(Exception):
    """The device (or the task's lock) was not had within the hold's wait, or the work was stopped meanwhile."""


class TrustedHold:
    """``acquire`` and ``release`` of a trusted shared hold of ``device_lock`` (a SharedDeviceLock), with
    ``task_lock`` after it where given. Each ``acquire`` waits at most ``timeout`` seconds; with ``stopped`` (a
    callable) it tries every POLL_S and gives up as soon as ``stopped()`` is true. ``on_acquire`` and
    ``on_release`` are called once the hold is taken and let go. ``held``: whether it is held now."""

    def __init__(self, device_lock, timeout: float, task_lock=None, stopped=None, on_acquire=None, on_release=None):
        self.device_lock, self.task_lock, self.timeout, self.stopped = device_lock, task_lock, timeout, stopped
        self.on_acquire, self.on_release = on_acquire, on_release
        self.held = False

    def acquire(self) -> None:
        if self.held:
            return
        deadline = time.monotonic() + self.timeout
        if self.stopped is None:
            if not self.device_lock.acquire(shared=True, trusted=True, timeout=self.timeout):
                raise HoldNotHad()
        else:
            while not self.device_lock.acquire(blocking=False, shared=True, trusted=True):
                if self.stopped() or time.monotonic() > deadline:
                    raise HoldNotHad()
                time.sleep(POLL_S)
        if self.task_lock is not None and not self.task_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            self.device_lock.release(trusted=True)
            raise HoldNotHad()
        self.held = True
        if self.on_acquire is not None:
            self.on_acquire()

    def release(self) -> None:
        if self.held:
            self.held = False
            if self.task_lock is not None:
                self.task_lock.release()
            self.device_lock.release(trusted=True)
            if self.on_release is not None:
                self.on_release()
