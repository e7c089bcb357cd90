"""The process executor: one process per device, each with an Evaluator of its own, candidates spread over them.

The local executor keeps every device's Evaluator in one Python process, so its evaluators share that process's
trusted-side work (inputs, reference runs, comparisons, the worker protocol) under one interpreter lock: the more
GPUs, the longer each candidate holds its device while the trusted side waits its turn (multi-GPU in
bench/RESULTS.md). Here each device's trusted side has its own process, as each Ray actor has
(executors/ray_executor.py), with the caches shared on disk and the device lock per physical GPU
(kbench_env/machine/device_lock.py).

Each device process (``spawn``: no CUDA state is inherited) makes its Evaluator once and runs the candidates it
is sent on a thread pool (builds overlap, the device lock orders the device work). A candidate goes to the live
device process with the fewest outstanding. Each process answers on a pipe of its own (a process killed while
writing can garble or lock only its own channel: a queue shared by all processes was left locked by one killed
mid-write, and every later result waited for ever, issue #34). A device process that dies, or that holds a
candidate past ``stuck_after`` seconds (then it is killed), loses nothing: its candidates, taken or not, are sent to
another live process, up to ``RETRIES`` times each, and the result says so (``RetriedResult``: ``retries``,
``retried_because``); with no live process left they fail with an error naming what happened. No wait here is
without a deadline. Same arguments as the local executor (``options.py``); ``workers``: candidates in flight per
device process (default: the Evaluator's ``build_workers``).
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
from dataclasses import dataclass, field
from multiprocessing.reduction import ForkingPickler

from kbench_env.executors.evaluates import in_order
from kbench_env.executors.local import local_devices
from kbench_env.executors.options import check_arguments
from kbench_env.executors.retried import RetriedResult
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.result import EvalResult
from kbench_env.tasks.task import Task

#: Times a candidate is sent again after the process it was sent to died (or was killed as stuck).
RETRIES = 2
#: A candidate running this long in a device process is stuck there: the process is killed and the candidate sent
#: again. Far above an evaluation's own deadlines (the worker's build, run and timing timeouts, sandbox.Limits).
STUCK_AFTER_S = 3600.0
#: How long a device process that exited may keep its pipe open (a descendant holding it) before it counts as dead.
_EXIT_GRACE_S = 5.0
#: How long the parent waits for a device process to make its Evaluator.
_READY_TIMEOUT_S = 600.0


def _serve(index: int, device: str, evaluator_kwargs: dict, workers: int | None, jobs, results) -> None:
    """A device process: one Evaluator, the jobs it is sent run on a thread pool, each started and finished said on
    ``results`` (this process's own pipe) as it happens."""
    lock = threading.Lock()

    def put(message) -> None:
        try:
            with lock:
                results.send(message)
        except (OSError, ValueError):  # the parent is gone: nobody waits for it
            pass

    try:
        evaluator = Evaluator(device=device, **evaluator_kwargs)
    except BaseException as exc:  # noqa: BLE001 - said to the parent, which raises it
        put(("failed", index, f"{type(exc).__name__}: {exc}"))
        return
    put(("ready", index, None))

    def run(job_id, task, action, seed):
        put(("started", job_id, None))
        try:
            put(("done", job_id, evaluator.evaluate(task, action, seed)))
        except BaseException as exc:  # noqa: BLE001 - one candidate's error, not the process's
            put(("error", job_id, f"{type(exc).__name__}: {exc}"))

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
            put(("taken", job[0], None))
            pool.submit(run, *job)
    evaluator.close()


@dataclass
class _Job:
    id: int
    args: tuple  # (task, action, seed)
    reply: queue.Queue  # the queue of the call that sent it
    device: int = -1  # the device process it is with
    sent_at: float = 0.0  # when it was sent there (monotonic)
    taken: bool = False  # that process took it from its queue
    started: float | None = None  # when that process said it began (monotonic)
    lost: list = field(default_factory=list)  # why it was sent again, one line per time


class ProcessExecutor:
    """Evaluate batches on every local device, one process per device. Arguments: see
    ``kbench_env.executors.options``; ``workers`` is per device process; ``stuck_after``: seconds a candidate may
    run in a device process (or wait there untaken) before that process is killed as stuck and the candidate sent
    elsewhere."""

    def __init__(self, device: str | list[str] = "auto", workers: int | None = None, *,
                 stuck_after: float = STUCK_AFTER_S, **evaluator_kwargs):
        check_arguments("processes", evaluator_kwargs)
        self.devices = local_devices(device)
        self.stuck_after = float(stuck_after)
        ctx = mp.get_context("spawn")
        self._jobs = [ctx.Queue() for _ in self.devices]
        pipes = [ctx.Pipe(duplex=False) for _ in self.devices]
        # not daemonic: an Evaluator starts processes of its own (fork server, builder), which a daemon may not
        self._procs = [ctx.Process(target=_serve, args=(i, d, evaluator_kwargs, workers, q, w),
                                   name=f"kbench-evaluator-{d}")
                       for i, (d, q, (_, w)) in enumerate(zip(self.devices, self._jobs, pipes))]
        for p in self._procs:
            p.start()
        for _, w in pipes:
            w.close()  # the device process holds the only write end: its death ends the reader below
        atexit.register(self.close)  # before multiprocessing's own exit handler, which joins the processes
        self._inbox: queue.Queue = queue.Queue()  # (device index, message) from every device process
        for i, (r, _) in enumerate(pipes):
            threading.Thread(target=self._read, args=(i, r), name=f"kbench-process-executor-read-{i}",
                             daemon=True).start()
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._pending: dict[int, _Job] = {}  # job id -> job, until its result is handed to its caller
        self._dead: dict[int, str] = {}  # device index -> why it is out
        self._exited_at: dict[int, float] = {}
        self._ended: set = set()  # device indexes whose pipe has closed (every message of theirs is in)
        self._closed = False
        self.sent = [0] * len(self.devices)  # candidates sent to each device process so far
        self._await_ready()
        self._dispatcher = threading.Thread(target=self._dispatch, name="kbench-process-executor", daemon=True)
        self._dispatcher.start()

    def _read(self, i: int, conn) -> None:
        """Move device process ``i``'s messages to the inbox, in order, until its pipe closes."""
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            except Exception as exc:  # noqa: BLE001 - a garbled message: the process's channel is broken
                self._inbox.put((i, ("garbled", None, f"{type(exc).__name__}: {exc}")))
                break
            self._inbox.put((i, message))
        conn.close()
        self._inbox.put((i, ("ended", None, None)))

    def _await_ready(self) -> None:
        ready, failures = set(), {}  # device process indexes
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while len(ready) + len(failures) < len(self.devices):
            try:
                i, (kind, _, error) = self._inbox.get(timeout=1)
            except queue.Empty:
                late = time.monotonic() > deadline
                for i, p in enumerate(self._procs):
                    if i not in ready and i not in failures and (late or not p.is_alive()):
                        failures[i] = (f"no Evaluator within {_READY_TIMEOUT_S:.0f} s" if p.is_alive() else
                                       f"its process exited (code {p.exitcode}) before its Evaluator was made")
                continue
            if kind == "ready":
                ready.add(i)
            elif kind in ("failed", "garbled", "ended") and i not in ready:
                failures.setdefault(i, error or f"its process exited (code {self._procs[i].exitcode}) before "
                                                "its Evaluator was made")
        if failures:
            self.close()
            raise RuntimeError("ProcessExecutor: an Evaluator could not be made: "
                               + "; ".join(f"{self.devices[i]}: {e}" for i, e in sorted(failures.items())))

    def _dispatch(self) -> None:
        """Route each result to the call waiting for it; find device processes that died or hold a candidate past
        ``stuck_after``, and send their candidates elsewhere."""
        while not self._closed:
            try:
                i, (kind, job_id, payload) = self._inbox.get(timeout=0.5)
            except queue.Empty:
                pass
            else:
                self._route(i, kind, job_id, payload)
            self._watch()

    def _route(self, i: int, kind: str, job_id, payload) -> None:
        with self._lock:
            if kind in ("ended", "garbled"):
                self._ended.add(i)
                if kind == "garbled":
                    self._dead.setdefault(i, f"its answer could not be read ({payload})")
                return
            job = self._pending.get(job_id)
            if job is None or job.device != i:  # an answer from a process the job has been taken away from
                return
            if kind == "taken":
                job.taken = True
                return
            if kind == "started":
                job.started = time.monotonic()
                return
            if kind in ("done", "error"):
                del self._pending[job_id]
        if kind in ("done", "error"):
            job.reply.put((job.id, kind, payload, job.lost))

    def _watch(self) -> None:
        """Mark device processes dead (exited, their pipe drained; or stuck: killed) and re-send their jobs."""
        now = time.monotonic()
        with self._lock:
            for i, p in enumerate(self._procs):
                if i in self._dead:
                    continue
                if not p.is_alive():
                    self._exited_at.setdefault(i, now)
                    if i in self._ended or now - self._exited_at[i] > _EXIT_GRACE_S:
                        self._dead[i] = f"its process exited (code {p.exitcode})"
                elif any(j.device == i and now - (j.started if j.started is not None else j.sent_at) > self.stuck_after
                         and (j.started is not None or not j.taken) for j in self._pending.values()):
                    p.kill()  # stuck: its candidates go elsewhere
                    self._exited_at[i] = now
                    self._dead[i] = (f"it ran a candidate, or left one untaken, over {self.stuck_after:g} s "
                                     "(stuck: killed)")
            orphans = [j for j in self._pending.values() if j.device in self._dead]
            for job in orphans:
                why = (f"the evaluator process of {self.devices[job.device]} (#{job.device}) "
                       f"{'died' if 'exited' in self._dead[job.device] else 'was out'}: {self._dead[job.device]}, "
                       f"with this candidate {'in flight' if job.started is not None else 'not yet taken'}")
                job.lost.append(why)
                live = self._live()
                if len(job.lost) > RETRIES or not live:
                    del self._pending[job.id]
                    job.reply.put((job.id, "error", why + ("" if live else "; no evaluator process is left")
                                   + f" (sent {len(job.lost)} times)", job.lost))
                    continue
                self._assign(job, live)

    def _live(self) -> list[int]:
        return [i for i, p in enumerate(self._procs) if i not in self._dead and p.is_alive()]

    def _assign(self, job: _Job, live: list[int]) -> None:
        """Send ``job`` to the least loaded of ``live`` (with ``self._lock`` held)."""
        load = [0] * len(self.devices)
        for j in self._pending.values():
            if j.device >= 0 and j is not job:
                load[j.device] += 1
        job.device, job.sent_at, job.taken, job.started = min(live, key=load.__getitem__), time.monotonic(), False, None
        self.sent[job.device] += 1
        self._jobs[job.device].put((job.id, *job.args))

    def _send(self, task, action, seed, reply: queue.Queue) -> int:
        # a queue pickles in a thread of its own, where an error is only printed and the caller would wait for
        # ever: what cannot be sent is refused here
        ForkingPickler.dumps((task, action, seed))
        with self._lock:
            if self._closed:
                raise RuntimeError("ProcessExecutor: closed")
            job = _Job(next(self._ids), (task, action, seed), reply)
            live = self._live()
            if not live:
                raise RuntimeError("ProcessExecutor: no evaluator process is left ("
                                   + "; ".join(f"{self.devices[i]} #{i}: {why}" for i, why in self._dead.items())
                                   + ")")
            self._pending[job.id] = job
            self._assign(job, live)
        return job.id

    def evaluate_iter(self, items: list, max_workers: int | None = None, seed: int | None = None):
        """Yield ``(index, EvalResult)`` for ``[(task, action), ...]`` as the evaluations finish (each result's
        ``device`` says which ran it; one sent again after its process died is a ``RetriedResult`` that says
        why). ``max_workers`` is accepted for the local executor's signature; the device processes' pools bound
        what runs at once."""
        reply: queue.Queue = queue.Queue()
        index = {self._send(t, a, seed, reply): i for i, (t, a) in enumerate(items)}
        for _ in range(len(index)):
            while True:  # every job ends in one reply (a result or an error) while the dispatcher runs
                try:
                    job_id, kind, payload, lost = reply.get(timeout=1)
                    break
                except queue.Empty:
                    if not self._dispatcher.is_alive():
                        raise RuntimeError("ProcessExecutor: its dispatcher thread has ended (the executor was "
                                           "closed, or it failed: see the log) with candidates of this batch "
                                           "unanswered") from None
            if kind != "done":
                raise RuntimeError(f"ProcessExecutor: candidate {index[job_id]} of the batch: {payload}")
            yield index[job_id], RetriedResult.of(payload, lost) if lost else payload

    def evaluate_many(self, items: list, max_workers: int | None = None, seed: int | None = None,
                      progress=None) -> list[EvalResult]:
        """``evaluate_iter``'s results in order (``Evaluates.evaluate_many``; ``max_workers`` as there)."""
        return in_order(self.evaluate_iter(items, max_workers, seed), len(items), progress)

    def evaluate(self, task: Task, action, seed: int | None = None) -> EvalResult:
        return self.evaluate_many([(task, action)], seed=seed)[0]

    def close(self) -> None:
        """Stop every device process (each closes its Evaluator: spare worker and builder processes); candidates
        still outstanding fail with an error."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        for q, p in zip(self._jobs, self._procs):
            if p.is_alive():
                q.put(None)
            else:
                q.cancel_join_thread()  # nobody reads it: its feeder must not hold up this process's exit
        for p in self._procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
                p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
        with self._lock:
            pending, self._pending = list(getattr(self, "_pending", {}).values()), {}
        for job in pending:
            job.reply.put((job.id, "error", "the executor was closed before this candidate was answered", job.lost))
