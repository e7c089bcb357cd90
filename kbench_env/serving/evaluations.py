"""Evaluations on the server: each runs through the executor (``kbench_env.executors``) on a thread of a pool as
wide as the server's workers, after it took a place in ``Admission``; the place is given back when the
evaluation ends, and the evaluation is logged (``logevents.evaluation``). A request waits at most
``request_timeout`` for its result (504 past it)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor

from kbench_env.pipeline.result import EvalResult
from kbench_env.serving.admission import Admission, Refused
from kbench_env.serving import logevents
from kbench_env.serving.metrics import Metrics


class Evaluations:
    def __init__(self, executor, admission: Admission, metrics: Metrics):
        self.executor = executor
        self.admission = admission
        self.metrics = metrics
        self.pool = ThreadPoolExecutor(max_workers=max(1, admission.limits.workers), thread_name_prefix="kbench-eval")

    def _job(self, task, source, seed, where: dict) -> EvalResult:
        self.admission.started()
        try:
            result = self.executor.evaluate(task, source, seed)
        except BaseException as exc:
            self.metrics.errors[type(exc).__name__] += 1
            logevents.evaluation(task, source, where, exc=exc)
            raise
        finally:
            self.admission.give_back(was_running=True)
        summary = result.to_dict()
        self.metrics.evaluated(summary)
        logevents.evaluation(task, source, where, summary)
        return result

    def submit(self, task, source: str, seed: int | None, where: dict | None = None) -> Future:
        """Run one evaluation whose place the caller already took; ``where`` names its origin in the log
        (``logevents.origin``: request, session or batch)."""
        fut = self.pool.submit(self._job, task, source, seed, where if where is not None else logevents.origin())
        fut.add_done_callback(lambda f: f.cancelled() and self.admission.give_back(was_running=False))
        return fut

    async def result(self, fut: Future, what: str) -> EvalResult:
        # shield: a request that stops waiting must not cancel an evaluation that holds its place
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)),
                                          self.admission.limits.request_timeout)
        except asyncio.TimeoutError:
            self.metrics.errors["request_timeout"] += 1
            raise Refused(504, f"{what}: no result within {self.admission.limits.request_timeout:g} s "
                               f"(--request-timeout); the evaluation goes on and its place stays taken until it "
                               f"ends", "TIMEOUT") from None

    async def run(self, task, source: str, seed: int | None, where: dict | None = None) -> EvalResult:
        self.admission.take(1)
        return await self.result(self.submit(task, source, seed, where), f"task {task.name}")

    def close(self) -> None:
        """Let running and queued evaluations finish, then close the executor."""
        self.pool.shutdown(wait=True)
        self.executor.close()
