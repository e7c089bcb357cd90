"""Spare workers: one started, confined, idle worker kept ready for the next candidate, so that a step does not wait
for a worker to start."""

from __future__ import annotations

import threading
import time

from kbench_env.device import Device
from kbench_env.sandbox import policy
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.sandbox.policy import Limits
from kbench_env.sandbox.worker_process import Worker


class SpareWorkers:
    """One started, confined, idle worker kept ready for the next candidate, so that a step does not wait for a
    worker to start: on the CPU, the fork, confinement and imports; on a GPU, also CUDA's and the forward audit's
    profiler's start (seconds), which a spare does while nothing of the caller's
    waits on it.

    A spare holds no candidate code until ``take`` assigns it one, and serves one candidate only, as every worker.
    The replacement starts when one is taken on the CPU (a start costs milliseconds, done while the taken worker
    builds), and on a GPU when the caller says its evaluation is over (``evaluation_over``), so that a spare's start,
    which launches a kernel and starts the profiler, never overlaps a timed run of this caller's; other callers'
    evaluations on the same GPU may overlap it, as any worker's start would.
    """

    def __init__(self, backend: str, device: str, build_root: str, limits: Limits, builder=None):
        self._args = (backend, device, build_root, limits)
        self._builder = builder
        self._refill_at_take = Device.parse(device).is_cpu
        self._lock = threading.Lock()
        self._spare: Worker | None = None
        self._starting = False
        self._closed = False
        self.served = 0  # candidates given a spare (the rest started a worker of their own)

    def take(self, source: str) -> Worker:
        """A worker for ``source``: the spare if one is ready and alive, else a newly started one."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and time.monotonic() - spare._t_created > policy.SPARE_IDLE_S - 5:
            spare.close()  # about to leave by itself: it might go between being given the source and loading it
            spare = None
        worker = None
        if spare is not None:
            try:
                spare.assign(source)  # first: the spare starts loading while the replacement is set going
                self.served += 1
                worker = spare
            except (WorkerError, ValueError):
                spare.close()
        if self._refill_at_take:
            self.refill()
        return worker if worker is not None else Worker(source, *self._args, builder=self._builder)

    def evaluation_over(self) -> None:
        """The caller's evaluation (its timed runs included) has ended: on a GPU, the replacement starts now."""
        if not self._refill_at_take:
            self.refill()

    def refill(self) -> None:
        """Start a spare in the background, unless one is ready or starting."""
        with self._lock:
            if self._closed or self._spare is not None or self._starting:
                return
            self._starting = True
        threading.Thread(target=self._start_one, name="kbench-spare-worker", daemon=True).start()

    def _start_one(self) -> None:
        try:
            worker = Worker(None, *self._args, builder=self._builder)
        except Exception:  # noqa: BLE001 - no spare this time: the next take starts its own worker
            worker = None
        with self._lock:
            self._starting = False
            keep = worker is not None and not self._closed and self._spare is None
            if keep:
                self._spare = worker
        if worker is not None and not keep:
            worker.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.close()
