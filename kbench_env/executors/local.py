"""The local executor: one Evaluator per device (all GPUs, or the CPU), candidates spread over them.

Each evaluation runs on a thread of this process under the Evaluator's own deadlines (the worker's build, run and
timing timeouts); waiting for them has one more: a candidate still running after ``stuck_after`` seconds ends the
batch with an error naming it (its thread cannot be stopped from here; it is left to its Evaluator's deadlines)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import torch

from kbench_env.machine.device import Device
from kbench_env.executors.evaluates import in_order
from kbench_env.executors.options import check_arguments
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.result import EvalResult
from kbench_env.tasks.task import Task

#: A candidate still running after this long is stuck: far above an evaluation's own deadlines (sandbox.Limits).
STUCK_AFTER_S = 3600.0


def local_devices(device: str | list[str] = "auto") -> list[str]:
    """The devices ``device`` names here: "auto" every GPU, else the CPU; "cuda" every GPU; "cpu" or "cuda:N"
    itself; a list, each of its entries."""
    if isinstance(device, (list, tuple)):
        return [str(Device.parse(d)) for d in device]
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    dev = Device.parse("cuda" if device == "auto" and n else "cpu" if device == "auto" else device)
    if dev.is_cuda and dev.index is None:
        if not n:
            raise ValueError("device='cuda': this machine has no CUDA device; use device='cpu' or 'auto'")
        return [f"cuda:{i}" for i in range(n)]
    return [str(dev)]


class LocalExecutor:
    """Evaluate batches on every local device. Each device's Evaluator runs and times one candidate at a time;
    builds of the candidates in flight overlap on the CPU cores (``workers`` at once). Arguments: see
    ``kbench_env.executors.options``."""

    def __init__(self, device: str | list[str] = "auto", workers: int | None = None, *,
                 stuck_after: float = STUCK_AFTER_S, **evaluator_kwargs):
        check_arguments("local", evaluator_kwargs)
        self.stuck_after = float(stuck_after)
        self.devices = local_devices(device)
        self.evaluators = [Evaluator(device=d, **evaluator_kwargs) for d in self.devices]
        self.workers = workers or self.evaluators[0].build_workers
        self._load = [0] * len(self.evaluators)
        self._lock = threading.Lock()

    def _pick(self) -> int:
        with self._lock:
            i = min(range(len(self._load)), key=self._load.__getitem__)
            self._load[i] += 1
            return i

    def _run(self, task, action, seed):
        i = self._pick()
        try:
            return self.evaluators[i].evaluate(task, action, seed)
        finally:
            with self._lock:
                self._load[i] -= 1

    def evaluate_many(self, items: list, max_workers: int | None = None, seed: int | None = None,
                      progress=None) -> list[EvalResult]:
        """``evaluate_iter``'s results in order (``Evaluates.evaluate_many``); ``max_workers`` in flight at once
        (default ``workers``)."""
        return in_order(self.evaluate_iter(items, max_workers, seed), len(items), progress)

    def evaluate_iter(self, items: list, max_workers: int | None = None, seed: int | None = None):
        """Yield ``(index, EvalResult)`` for ``[(task, action), ...]`` as the evaluations finish, spread over the
        devices (each result's ``device`` says which ran it). Raises RuntimeError if one runs over
        ``stuck_after`` seconds."""
        started: dict = {}

        def run(i, task, action):
            started[i] = time.monotonic()
            return self._run(task, action, seed)

        pool = ThreadPoolExecutor(max_workers=max(1, max_workers or self.workers))
        try:
            pending = {pool.submit(run, i, t, a): i for i, (t, a) in enumerate(items)}
            while pending:
                done, _ = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield pending.pop(fut), fut.result()
                now = time.monotonic()
                stuck = [i for i in pending.values() if i in started and now - started[i] > self.stuck_after]
                if stuck:
                    raise RuntimeError(f"LocalExecutor: candidate {stuck[0]} of the batch has run over "
                                       f"{self.stuck_after:g} s (stuck_after): its evaluation is left to its "
                                       f"Evaluator's deadlines")
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def evaluate(self, task: Task, action, seed: int | None = None) -> EvalResult:
        return self._run(task, action, seed)

    def close(self) -> None:
        """Close every device's Evaluator (its spare worker and builder processes)."""
        for ev in self.evaluators:
            ev.close()


