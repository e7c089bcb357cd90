"""torch's intra-op thread count in the trusted process while an evaluation holds a CPU device: lowered to the
cores the sandboxed worker leaves, so the two processes' threads do not outnumber the cores and wait on each
other."""

from __future__ import annotations

import contextlib
import os
import threading

import torch

from kbench_env.machine.device import Device


class ParentThreads:
    """torch's intra-op thread count in this process, lowered while an evaluation holds a CPU device and restored
    after. torch keeps the count per thread (OpenMP's) and as the default of threads to come: each holder restores
    its own thread's count, and the last one out the count found by the first one in, so overlapping holders (two
    Evaluators' evaluations in threads) leave the process as it was."""

    def __init__(self):
        self._lock = threading.Lock()
        self._holders = 0
        self._before = 0

    @contextlib.contextmanager
    def lowered(self, n: int):
        with self._lock:
            if self._holders == 0:
                self._before = torch.get_num_threads()
            self._holders += 1
            own = torch.get_num_threads()
            torch.set_num_threads(max(1, min(n, own)))
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                torch.set_num_threads(own if self._holders else self._before)


PARENT_THREADS = ParentThreads()


def trusted_threads(device: str, worker_threads: int):
    """While an evaluation holds a CPU device, this process's torch computes (references, input sets,
    comparisons) on the cores the worker does not use (``worker_threads``, ``Limits.threads``): with the default
    of one thread per core, the two processes' threads outnumbered the cores and waited on each other. A GPU
    evaluation keeps the count."""
    if not Device.parse(device).is_cpu:
        return contextlib.nullcontext()
    return PARENT_THREADS.lowered((os.cpu_count() or 1) - worker_threads)
