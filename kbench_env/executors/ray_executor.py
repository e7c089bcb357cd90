"""The Ray executor: one actor per GPU (or per CPU slot), each holding an Evaluator for its device, on an
existing Ray cluster (``address="auto"``) or a local one. Builds use the actor's CPUs; results come back as
EvalResult dicts and are rebuilt here, so callers see the same objects as with the local executor."""

from __future__ import annotations

from kbench_env.device import Device
from kbench_env.executors.options import check_arguments
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.result import EvalResult


class _EvaluatorActor:
    def __init__(self, device: str, evaluator_kwargs: dict):
        self.evaluator = Evaluator(device=device, **evaluator_kwargs)

    def evaluate(self, task, action, seed):
        return self.evaluator.evaluate(task, action, seed).to_dict()


class RayExecutor:
    """Arguments as the local executor's (``kbench_env.executors.options``), and the cluster's:
        device: "auto" (cuda when the cluster has GPUs), "cuda" (each actor gets one GPU) or "cpu".
        workers: actors to start (default: one per GPU in the cluster, else 1).
        address: a Ray cluster address ("auto" to join the running one); None starts a local instance.
        cpus_per_actor: CPUs reserved per actor for its builds.
        max_concurrency: evaluations one actor takes at once.
    """

    def __init__(self, device: str = "auto", workers: int | None = None, *, address: str | None = None,
                 cpus_per_actor: float = 1, max_concurrency: int = 2, **evaluator_kwargs):
        check_arguments("ray", evaluator_kwargs)
        import ray

        if not isinstance(device, str) or (device != "auto" and Device.parse(device).index is not None):
            raise ValueError(f"device={device!r}: the Ray executor takes 'auto', 'cpu' or 'cuda' (each actor's GPU "
                             f"is its own 'cuda'); a list or cuda:N is for the local executor")
        if not ray.is_initialized():
            ray.init(address=address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
        gpus = int(ray.cluster_resources().get("GPU", 0))
        # "auto" asks the cluster, not this process: the actors may run where this driver has no GPU
        dev = Device.parse(("cuda" if gpus else "cpu") if device == "auto" else device)
        n = workers or (gpus if dev.is_cuda and gpus else 1)
        opts = {"num_cpus": cpus_per_actor, "max_concurrency": max_concurrency}
        if dev.is_cuda:
            opts["num_gpus"] = 1  # each actor's one GPU is its "cuda"
        actor_cls = ray.remote(_EvaluatorActor)
        self.actors = [actor_cls.options(**opts).remote(dev.kind, evaluator_kwargs) for _ in range(n)]
        self._ray = ray

    def evaluate_many(self, items: list, seed: int | None = None) -> list[EvalResult]:
        refs = [self.actors[i % len(self.actors)].evaluate.remote(task, action, seed)
                for i, (task, action) in enumerate(items)]
        return [EvalResult.from_dict(d) for d in self._ray.get(refs)]

    def evaluate(self, task, action, seed: int | None = None) -> EvalResult:
        return self.evaluate_many([(task, action)], seed)[0]

    def close(self) -> None:
        for a in self.actors:
            self._ray.kill(a)
        self.actors = []
