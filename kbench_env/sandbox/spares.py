"""Spare workers: a pool of started, confined, idle workers, sized to the evaluations in flight, so that a candidate
does not wait for its worker to start (on a GPU: CUDA's context and the forward audit's profiler, seconds)."""

from __future__ import annotations

import os
import threading
import time
from collections import deque

import torch

from kbench_env.config import environ
from kbench_env.machine.device import Device
from kbench_env.sandbox.confine import policy
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.sandbox.worker_process import Worker

#: Spares at most by default: a spare is an idle process (the CPU's is cheap; a GPU's holds a CUDA context, about
#: 0.5 GB of device memory, and about 1 GB of host memory with torch and CUDA loaded).
MAX_SPARES = 16
#: Host memory (MemAvailable) left per spare, and device memory per GPU spare, when the pool's cap is worked out.
HOST_BYTES_PER_SPARE = 2 << 30
GPU_BYTES_PER_SPARE = 4 << 30


def default_cap(device: str) -> int:
    """How many spares a pool on ``device`` may keep: ``KBENCH_SPARE_WORKERS`` if set, else the smallest of
    MAX_SPARES, the cores, MemAvailable / HOST_BYTES_PER_SPARE and (a GPU) its memory / GPU_BYTES_PER_SPARE."""
    given = environ.get("KBENCH_SPARE_WORKERS")
    if given is not None:
        return given
    cap = min(MAX_SPARES, os.cpu_count() or 1)
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
        cap = min(cap, max(1, avail // HOST_BYTES_PER_SPARE))
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    if Device.parse(device).is_cuda:
        try:
            idx = Device.parse(device).index or 0
            cap = min(cap, max(1, torch.cuda.get_device_properties(idx).total_memory // GPU_BYTES_PER_SPARE))
        except Exception:  # noqa: BLE001 - no figure: the other bounds hold
            pass
    return max(1, cap)


class SpareWorkers:
    """Started, confined, idle workers kept ready for the next candidates: on the CPU, the fork, confinement and
    imports done; on a GPU, also CUDA's and the forward audit's profiler's start.

    The pool wants one spare per evaluation in flight (``active``: taken and not yet over; each is likely followed by
    another candidate, as in a trainer's batch), at least one, at most ``cap``; spares are started in the background
    when one is taken (while the taken worker builds) and when an evaluation ends. A spare holds no candidate code
    until ``take`` assigns it one, and serves one candidate only, as every worker: a worker that ran a candidate is
    never handed out again (``take`` pops it; it is closed with its evaluation).

    On a GPU with a single evaluation in flight, its replacement starts when the evaluation is over
    (``evaluation_over``), so that a spare's start, which launches a kernel and starts the profiler, never overlaps
    that evaluation's timed runs; with several in flight their workers' starts overlap each other's evaluations
    anyway (each candidate starts one worker wherever the start happens), and spares start at once.
    """

    def __init__(self, backend: str, device: str, build_root: str, limits: Limits, builder=None,
                 cap: int | None = None):
        self._args = (backend, device, build_root, limits)
        self._builder = builder
        self._cpu = Device.parse(device).is_cpu
        self._cap = cap
        self._lock = threading.Lock()
        self._ready: deque[Worker] = deque()
        self._starting = 0
        self._closed = False
        self.active = 0  # evaluations between ``take`` and ``evaluation_over``
        self.served = 0  # candidates given a spare (the rest started a worker of their own)
        self.started = 0  # spares started

    @property
    def cap(self) -> int:
        if self._cap is None:
            self._cap = default_cap(self._args[1])  # (on a GPU this reads its memory: done once, when first needed)
        return self._cap

    @property
    def ready(self) -> int:
        with self._lock:
            return len(self._ready)

    def take(self, source: str) -> Worker:
        """A worker for ``source``: a ready spare if one is alive, else a newly started one."""
        with self._lock:
            self.active += 1
            concurrent = self.active > 1
        worker = None
        while worker is None:
            spare = self._pop()
            if spare is None:
                break
            try:
                spare.assign(source)  # first: the spare starts loading while replacements are set going
                self.served += 1
                worker = spare
            except (WorkerError, ValueError):
                spare.close()
        if self._cpu or concurrent:
            self.refill()
        return worker if worker is not None else Worker(source, *self._args, builder=self._builder)

    def _pop(self) -> Worker | None:
        """The oldest ready spare that will not leave by itself before it loads its candidate, else None."""
        while True:
            with self._lock:
                spare = self._ready.popleft() if self._ready else None
            if spare is None:
                return None
            if time.monotonic() - spare._t_created <= policy.SPARE_IDLE_S - 5 and spare.proc.exitcode is None:
                return spare
            spare.close()  # about to leave (or gone): it might go between being given the source and loading it

    def evaluation_over(self) -> None:
        """An evaluation that ``take`` served (its timed runs included) has ended: start what the pool lacks."""
        with self._lock:
            self.active = max(0, self.active - 1)
        self.refill()

    def wanted(self) -> int:
        """Spares the pool wants now: one per evaluation in flight, at least one, at most ``cap``."""
        return min(self.cap, max(1, self.active))

    def refill(self) -> None:
        """Start, in the background, the spares the pool lacks (``wanted`` less those ready or starting)."""
        want = self.wanted()
        with self._lock:
            n = 0 if self._closed else want - len(self._ready) - self._starting
            if n <= 0:
                return
            self._starting += n
        for _ in range(n):
            threading.Thread(target=self._start_one, name="kbench-spare-worker", daemon=True).start()

    def _start_one(self) -> None:
        try:
            worker = Worker(None, *self._args, builder=self._builder)
        except Exception:  # noqa: BLE001 - no spare this time: the next take starts its own worker
            worker = None
        with self._lock:
            self._starting -= 1
            keep = worker is not None and not self._closed
            if keep:
                self._ready.append(worker)
                self.started += 1
        if worker is not None and not keep:
            worker.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spares, self._ready = list(self._ready), deque()
        for spare in spares:
            spare.close()
