"""The process executor: one process per device, each with an Evaluator of its own, candidates spread over them.

The local executor keeps every device's Evaluator in one Python process, so its evaluators share that process's
trusted-side work (inputs, reference runs, comparisons, the worker protocol) under one interpreter lock: the more
GPUs, the longer each candidate holds its device while the trusted side waits its turn (multi-GPU in
bench/RESULTS.md). Here each device's trusted side has its own process, as each Ray actor has
(executors/ray_executor.py), with the caches shared on disk and the device lock per physical GPU
(kbench_env/devicelock.py).

Each device process (``spawn``: no CUDA state is inherited) makes its Evaluator once and runs the candidates it
is sent on a thread pool (builds overlap, the device lock orders the device work). A candidate goes to the device
with the fewest outstanding. A device process that dies fails its outstanding candidates with an error naming it.
Same arguments as the local executor (``options.py``); ``workers``: candidates in flight per device process
(default: the Evaluator's ``build_workers``).
"""

from __future__ import annotations

import atexit
import itertools
import multiprocessing as mp
import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.reduction import ForkingPickler

from kbench_env.executors.local import local_devices
from kbench_env.executors.options import check_arguments
from kbench_env.pipeline.evaluator import Evaluator


def _serve(index: int, device: str, evaluator_kwargs: dict, workers: int | None, jobs, results) -> None:
    """A device process: one Evaluator, the jobs it is sent run on a thread pool, results sent back as they end."""
    try:
        evaluator = Evaluator(device=device, **evaluator_kwargs)
    except BaseException as exc:  # noqa: BLE001 - said to the parent, which raises it
        results.put(("failed", index, f"{type(exc).__name__}: {exc}"))
        return
    results.put(("ready", index, None))

    def run(job_id, task, action, seed):
        try:
            results.put(("done", job_id, evaluator.evaluate(task, action, seed)))
        except BaseException as exc:  # noqa: BLE001 - one candidate's error, not the process's
            results.put(("error", job_id, f"{type(exc).__name__}: {exc}"))

    parent = os.getppid()
    with ThreadPoolExecutor(max_workers=max(1, workers or evaluator.build_workers)) as pool:
        while True:
            try:
                job = jobs.get(timeout=2)
            except queue.Empty:
                if os.getppid() != parent:  # the parent died without closing: nobody waits for results
                    break
                continue
            if job is None:
                break
            pool.submit(run, *job)
    evaluator.close()


class ProcessExecutor:
    """Evaluate batches on every local device, one process per device. Arguments: see
    ``kbench_env.executors.options``; ``workers`` is per device process."""

    def __init__(self, device: str | list[str] = "auto", workers: int | None = None, **evaluator_kwargs):
        check_arguments("processes", evaluator_kwargs)
        self.devices = local_devices(device)
        ctx = mp.get_context("spawn")
        self._results = ctx.Queue()
        self._jobs = [ctx.Queue() for _ in self.devices]
        # not daemonic: an Evaluator starts processes of its own (fork server, builder), which a daemon may not
        self._procs = [ctx.Process(target=_serve, args=(i, d, evaluator_kwargs, workers, q, self._results),
                                   name=f"kbench-evaluator-{d}") for i, (d, q) in enumerate(zip(self.devices, self._jobs))]
        for p in self._procs:
            p.start()
        atexit.register(self.close)  # before multiprocessing's own exit handler, which joins the processes
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._waiting: dict[int, queue.Queue] = {}  # job id -> the queue of the call that sent it
        self._owner: dict[int, int] = {}  # job id -> device index
        self._closed = False
        self.sent = [0] * len(self.devices)  # candidates sent to each device process so far
        self._await_ready()
        self._dispatcher = threading.Thread(target=self._dispatch, name="kbench-process-executor", daemon=True)
        self._dispatcher.start()

    def _await_ready(self) -> None:
        ready, failures = set(), {}  # device process indexes
        while len(ready) + len(failures) < len(self.devices):
            try:
                kind, i, error = self._results.get(timeout=5)
            except queue.Empty:
                for i, p in enumerate(self._procs):
                    if not p.is_alive() and i not in ready and i not in failures:
                        failures[i] = f"its process exited (code {p.exitcode}) before its Evaluator was made"
                continue
            if kind == "ready":
                ready.add(i)
            else:
                failures[i] = error
        if failures:
            self.close()
            raise RuntimeError("ProcessExecutor: an Evaluator could not be made: "
                               + "; ".join(f"{self.devices[i]}: {e}" for i, e in sorted(failures.items())))

    def _dispatch(self) -> None:
        """Route each result to the call waiting for it; fail the jobs of a device process that died."""
        checked = time.monotonic()
        while not self._closed:
            if time.monotonic() - checked > 2:  # also while other processes keep answering
                self._fail_dead()
                checked = time.monotonic()
            try:
                kind, job_id, payload = self._results.get(timeout=2)
            except queue.Empty:
                continue
            except (EOFError, OSError):
                return
            with self._lock:
                waiter = self._waiting.pop(job_id, None)
                self._owner.pop(job_id, None)
            if waiter is not None:
                waiter.put((job_id, kind, payload))

    def _fail_dead(self) -> None:
        with self._lock:
            dead = {i for i, p in enumerate(self._procs) if not p.is_alive()}
            lost = [j for j, i in self._owner.items() if i in dead]
            for j in lost:
                i = self._owner.pop(j)
                error = (f"the evaluator process of {self.devices[i]} died (exit code {self._procs[i].exitcode}) with "
                         f"this candidate in flight")
                self._waiting.pop(j, queue.Queue()).put((j, "error", error))

    def _send(self, task, action, seed, reply: queue.Queue) -> int:
        # a queue pickles in a thread of its own, where an error is only printed and the caller would wait for
        # ever: what cannot be sent is refused here
        ForkingPickler.dumps((task, action, seed))
        with self._lock:
            if self._closed:
                raise RuntimeError("ProcessExecutor: closed")
            load = [0] * len(self.devices)
            for i in self._owner.values():
                load[i] += 1
            alive = [i for i, p in enumerate(self._procs) if p.is_alive()] or list(range(len(self.devices)))
            device = min(alive, key=load.__getitem__)
            job_id = next(self._ids)
            self._waiting[job_id], self._owner[job_id] = reply, device
            self.sent[device] += 1
        self._jobs[device].put((job_id, task, action, seed))
        return job_id

    def evaluate_iter(self, items: list, max_workers: int | None = None, seed: int | None = None):
        """Yield ``(index, EvalResult)`` for ``[(task, action), ...]`` as the evaluations finish (each result's
        ``device`` says which ran it). ``max_workers`` is accepted for the local executor's signature; the device
        processes' pools bound what runs at once."""
        reply: queue.Queue = queue.Queue()
        index = {self._send(t, a, seed, reply): i for i, (t, a) in enumerate(items)}
        for _ in range(len(index)):
            job_id, kind, payload = reply.get()
            if kind != "done":
                raise RuntimeError(f"ProcessExecutor: candidate {index[job_id]} of the batch: {payload}")
            yield index[job_id], payload

    def evaluate_many(self, items: list, seed: int | None = None) -> list:
        out = [None] * len(items)
        for i, r in self.evaluate_iter(items, seed=seed):
            out[i] = r
        return out

    def evaluate(self, task, action, seed: int | None = None):
        return self.evaluate_many([(task, action)], seed=seed)[0]

    def close(self) -> None:
        """Stop every device process (each closes its Evaluator: spare worker and builder processes)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        for q, p in zip(self._jobs, self._procs):
            if p.is_alive():
                q.put(None)
        for p in self._procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
