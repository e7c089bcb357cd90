"""The local executor: one Evaluator per device (all GPUs, or the CPU), candidates spread over them."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import torch

from kbench_env.pipeline.evaluator import Evaluator


def local_devices() -> list[str]:
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [f"cuda:{i}" for i in range(n)] or ["cpu"]


class LocalExecutor:
    """Evaluate batches on every local device. Each device's Evaluator runs and times one candidate at a time;
    builds of the candidates in flight overlap on the CPU cores (``build_workers`` in total)."""

    def __init__(self, devices: list[str] | None = None, build_workers: int | None = None, **evaluator_kwargs):
        self.devices = devices or local_devices()
        self.evaluators = [Evaluator(device=d, **evaluator_kwargs) for d in self.devices]
        self.build_workers = build_workers or self.evaluators[0].build_workers
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

    def evaluate_many(self, items: list, seed: int | None = None) -> list:
        with ThreadPoolExecutor(max_workers=max(1, self.build_workers)) as pool:
            return list(pool.map(lambda ta: self._run(ta[0], ta[1], seed), items))

    def evaluate(self, task, action, seed: int | None = None):
        return self._run(task, action, seed)

    def close(self) -> None:
        pass


