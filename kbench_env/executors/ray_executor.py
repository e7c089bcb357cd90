"""The Ray executor: one actor per GPU (or per CPU slot), each holding an Evaluator for its device, on an
existing Ray cluster (``address="auto"``) or a local instance (``"local"`` or None). Builds use the actor's CPUs;
results come back as EvalResult dicts and are rebuilt here, so callers see the same objects as with the local
executor. ``kbench serve --ray-address`` builds this same executor (``ray_cluster.connect`` is the one place an
address is understood).

An actor that dies (its worker process killed, its node gone) loses no evaluation: Ray restarts the actor
(``max_restarts=-1``, on another node when its own is gone) and the evaluation is sent again to another live actor,
up to ``retries`` times; its result then says so (``RetriedResult``: ``retries`` and ``retried_because``). Ray's own
task retries stay off so that a retry is never silent. An actor that has not answered within ``stuck_after``
seconds is stuck: it is killed (Ray restarts it) and the evaluation is sent again the same way: no wait here is
without a deadline."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed

from kbench_env.backends import get_backend
from kbench_env.machine.device import Device
from kbench_env.executors.evaluates import in_order
from kbench_env.executors.local import STUCK_AFTER_S
from kbench_env.executors.options import check_arguments
from kbench_env.executors.retried import RetriedResult
from kbench_env.pipeline import formats
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.result import EvalResult
from kbench_env.pipeline.rules import DEFAULT as DEFAULT_RULES, check_rules
from kbench_env.machine.ray_cluster import connect
from kbench_env.tasks.task import Task


class _EvaluatorActor:
    def __init__(self, device: str, evaluator_kwargs: dict):
        self.evaluator = Evaluator(device=device, **evaluator_kwargs)

    def evaluate(self, task, action, seed):
        return self.evaluator.evaluate(task, action, seed).to_dict()


def actor_device(device: str, cluster_gpus: int) -> Device:
    """The device each actor evaluates on: "auto" asks the cluster, not this process (the actors may run where
    this driver has no GPU): its own GPU ("cuda") when the cluster has GPUs, else the CPU."""
    if not isinstance(device, str) or (device != "auto" and Device.parse(device).index is not None):
        raise ValueError(f"device={device!r}: the Ray executor takes 'auto', 'cpu' or 'cuda' (each actor's GPU "
                         f"is its own 'cuda'); a list or cuda:N is for the local executor")
    return Device.parse(("cuda" if cluster_gpus else "cpu") if device == "auto" else device)


def _lost_actor_errors(ray) -> tuple:
    exc = ray.exceptions
    return tuple(e for e in (getattr(exc, "RayActorError", None), getattr(exc, "ActorUnavailableError", None),
                             getattr(exc, "WorkerCrashedError", None), getattr(exc, "NodeDiedError", None)) if e)


class RayExecutor:
    """Arguments as the local executor's (``kbench_env.executors.options``), and the cluster's:
        device: "auto" (cuda when the cluster has GPUs), "cuda" (each actor gets one GPU) or "cpu".
        workers: actors to start (default: one per GPU in the cluster, else 1).
        address: "auto" (the running cluster), a cluster address, or "local"/None (a local instance).
        cpus_per_actor: CPUs reserved per actor for its builds.
        max_concurrency: evaluations one actor takes at once.
        retries: times an evaluation is sent again after its actor died.
        stuck_after: seconds an actor may take to answer before it is killed as stuck (and restarted).
    ``device``, ``backend``, ``backend_name``, ``rules`` and ``format`` are what the actors evaluate with: the prompts of a
    server in front of this executor name them.
    """

    def __init__(self, device: str = "auto", workers: int | None = None, *, address: str | None = None,
                 cpus_per_actor: float = 1, max_concurrency: int = 2, retries: int = 3,
                 stuck_after: float = STUCK_AFTER_S, **evaluator_kwargs):
        check_arguments("ray", evaluator_kwargs)
        actor_device(device, 0)  # a bad device fails before Ray starts
        local_cpus = max(os.cpu_count() or 1, int((workers or 1) * cpus_per_actor + 0.999))
        ray = connect(address, num_cpus=local_cpus)
        gpus = int(ray.cluster_resources().get("GPU", 0))
        dev = actor_device(device, gpus)
        n = workers or (gpus if dev.is_cuda and gpus else 1)
        opts = {"num_cpus": cpus_per_actor, "max_concurrency": max_concurrency, "max_restarts": -1,
                "max_task_retries": 0}
        if dev.is_cuda:
            opts["num_gpus"] = 1  # each actor's one GPU is its "cuda"
        actor_cls = ray.remote(_EvaluatorActor)
        self.actors = [actor_cls.options(**opts).remote(dev.kind, evaluator_kwargs) for _ in range(n)]
        self.device = str(Device(dev.kind))
        self.format, self.backend_name = formats.resolve(evaluator_kwargs.get("format", formats.DEFAULT),
                                                         evaluator_kwargs.get("backend"), self.device)
        self.backend = get_backend(self.backend_name)
        self.rules = check_rules(evaluator_kwargs.get("rules") or DEFAULT_RULES)
        self.retries = retries
        self.stuck_after = float(stuck_after)
        self.workers = n * max_concurrency
        self._ray = ray
        self._lost = _lost_actor_errors(ray)
        self._load = [0] * n
        self._lock = threading.Lock()

    def _pick(self, avoid: set) -> int:
        """The least loaded actor, other than those that lost this evaluation (unless every one did)."""
        with self._lock:
            choices = [i for i in range(len(self.actors)) if i not in avoid] or list(range(len(self.actors)))
            i = min(choices, key=self._load.__getitem__)
            self._load[i] += 1
            return i

    def _run(self, task, action, seed) -> EvalResult:
        lost: list[str] = []
        avoid: set = set()
        while True:
            i = self._pick(avoid)
            try:
                d = self._ray.get(self.actors[i].evaluate.remote(task, action, seed), timeout=self.stuck_after)
            except (*self._lost, self._ray.exceptions.GetTimeoutError) as exc:
                if isinstance(exc, self._ray.exceptions.GetTimeoutError):  # stuck: killed, and Ray restarts it
                    self._ray.kill(self.actors[i], no_restart=False)
                    exc = RuntimeError(f"no answer within {self.stuck_after:g} s (stuck: the actor was killed)")
                if len(lost) >= self.retries:
                    raise RuntimeError(f"task {getattr(task, 'name', task)}: {len(lost) + 1} Ray actors died "
                                       f"evaluating it (--ray-address cluster; last: {type(exc).__name__}: "
                                       f"{str(exc)[:300]})") from exc
                lost.append(f"actor {i}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                avoid.add(i)
                continue
            finally:
                with self._lock:
                    self._load[i] -= 1
            result = EvalResult.from_dict(d)
            return RetriedResult.of(result, lost) if lost else result

    def evaluate_many(self, items: list, max_workers: int | None = None, seed: int | None = None,
                      progress=None) -> list[EvalResult]:
        """Results in order (``Evaluates.evaluate_many``): at most ``max_workers`` in flight, and at most what the
        actors take at once (``workers``, the default)."""
        n = max(1, min(max_workers or self.workers, self.workers, len(items)))
        with ThreadPoolExecutor(max_workers=n) as pool:
            futures = {pool.submit(self._run, t, a, seed): i for i, (t, a) in enumerate(items)}
            return in_order(((futures[f], f.result()) for f in as_completed(futures)), len(items), progress)

    def evaluate(self, task: Task, action, seed: int | None = None) -> EvalResult:
        return self._run(task, action, seed)

    def close(self) -> None:
        for a in self.actors:
            self._ray.kill(a, no_restart=True)
        self.actors = []
