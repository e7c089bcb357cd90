"""Executors and the vector env: the same results through the local executor, Ray (a local instance, CPU
backend) and ``gym.make_vec``; batches share one evaluation pool."""

from __future__ import annotations

import inspect

import gymnasium as gym
import pytest

import candidates as C
import kbench_env  # noqa: F401
from conftest import ROOT, read
from kbench_env.executors import LocalExecutor, RayExecutor, make_executor
from kbench_env.tasks.suite import resolve_task

RELU = resolve_task("level1/relu")
GOOD = read(ROOT / "tasks/solutions/cpu/level1/relu.py")
ITEMS = [(RELU, GOOD), (RELU, "garbage ("), (RELU, C.WRONG_SHAPE), (RELU, C.RAISES_IN_FORWARD)]
TIMING = {"warmup": 1, "min_reps": 3, "max_reps": 10, "min_seconds": 0.01}


def _summary(results):
    return [(r.correct, r.stage, r.error_stage, r.integrity_flags, r.reward if not r.correct else round(r.reward) > 0)
            for r in results]


@pytest.fixture(scope="module")
def local_results(evaluator):
    ex = make_executor("local", device="cpu", cache_dir=evaluator.cache_dir, timing=TIMING)
    return ex.evaluate_many(ITEMS, seed=5)


def test_local_executor(local_results):
    assert [r.correct for r in local_results] == [True, False, False, False]
    assert local_results[1].error_stage == "screen" and local_results[2].error_stage == "correctness"


def test_executors_take_the_same_arguments():
    def params(cls):
        return {n: p.default for n, p in inspect.signature(cls).parameters.items() if p.kind != p.KEYWORD_ONLY}
    assert params(LocalExecutor) == params(RayExecutor)
    assert list(params(LocalExecutor))[:2] == ["device", "workers"]


@pytest.mark.parametrize("kind", ["local", "ray"])
@pytest.mark.parametrize("wrong, right", [("devices", "device="), ("num_actors", "workers=")])
def test_a_misnamed_argument_names_the_right_one(kind, wrong, right):
    with pytest.raises(TypeError, match=right):
        make_executor(kind, **{wrong: 1})


def test_local_takes_the_ray_executors_options_only_by_name():
    with pytest.raises(TypeError, match="Ray executor only"):
        make_executor("local", device="cpu", address="auto")
    assert make_executor("local", device="cpu", workers=3).devices == ["cpu"]
    assert make_executor("local", device=["cpu"]).devices == ["cpu"]


def test_ray_actors_device_is_the_clusters():
    """"auto" asks the cluster (a GPU cluster's actors evaluate on their own "cuda", whatever the driver has), and
    the executor's device is what a server in front of it names in its prompts."""
    pytest.importorskip("ray")
    from kbench_env.machine.device import Device
    from kbench_env.executors.ray_executor import actor_device

    assert actor_device("auto", 8) == Device("cuda") and actor_device("auto", 0) == Device("cpu")
    assert actor_device("cpu", 8) == Device("cpu") and actor_device("cuda", 0) == Device("cuda")
    with pytest.raises(ValueError, match="cuda:N is for the local executor"):
        actor_device("cuda:1", 8)


def test_ray_executor_matches_local(local_results, evaluator):
    pytest.importorskip("ray")
    ex = make_executor("ray", device="cpu", workers=2, cpus_per_actor=1, cache_dir=str(evaluator.cache_dir),
                       timing=TIMING)
    try:
        ray_results = ex.evaluate_many(ITEMS, seed=5)
    finally:
        ex.close()
    assert _summary(ray_results) == _summary(local_results)
    assert (ex.device, ex.backend_name, ex.rules) == ("cpu", "cpu", "strict")


def test_make_vec_shares_one_evaluator(evaluator):
    venv = gym.make_vec("KBench-v0", num_envs=3, task="level1/relu", evaluator=evaluator, max_turns=2)
    assert all(e.evaluator is evaluator for e in venv.envs)
    obs, info = venv.reset(seed=0)
    assert len(obs) == 3 and all("ModelNew" in o for o in obs)
    obs, rewards, terms, truncs, info = venv.step([GOOD, "garbage (", GOOD])
    assert rewards[0] > 0 and rewards[1] == pytest.approx(-0.6) and rewards[2] > 0
    assert not truncs.any()
    obs, rewards, terms, truncs, info = venv.step([GOOD, GOOD, GOOD])
    assert truncs.all()
    obs, rewards, *_ = venv.step([GOOD, GOOD, GOOD])  # next-step autoreset: new prompts, no reward
    assert (rewards == 0).all() and all("ModelNew" in o for o in obs)
    venv.close()


def test_local_evaluate_iter_spreads_candidates_over_the_devices():
    """evaluate_iter yields every index once, as evaluations finish, and a batch in flight is spread over the
    devices' evaluators (least loaded first), as rl_batch --gpus N and a trainer's step use it."""
    import threading
    import time as _time

    class Fake:
        def __init__(self, name):
            self.name, self.seen, self.busy, self.most = name, [], 0, 0
            self.lock = threading.Lock()

        def evaluate(self, task, action, seed):
            with self.lock:
                self.busy += 1
                self.most = max(self.most, self.busy)
                self.seen.append(action)
            _time.sleep(0.05 if action % 3 else 0.15)
            with self.lock:
                self.busy -= 1
            return (self.name, action, seed)

    ex = make_executor("local", device=["cpu", "cpu"])
    for ev in ex.evaluators:
        ev.close()
    ex.evaluators = [Fake("a"), Fake("b")]
    ex._load = [0, 0]
    got = list(ex.evaluate_iter([(None, k) for k in range(12)], max_workers=12, seed=7))
    assert sorted(i for i, _ in got) == list(range(12))
    assert all(r[1] == i and r[2] == 7 for i, r in got)
    a, b = ex.evaluators
    assert len(a.seen) == len(b.seen) == 6 and a.most > 1 and b.most > 1
    assert [i for i, _ in got] != list(range(12))  # yielded as they finished, not in submission order
