"""KBench-v0 through the Gymnasium API: registration, the checker, random actions, turns, bad actions."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import kbench_env  # noqa: F401  (registers KBench-v0)
from conftest import ROOT, read
from kbench_env.config import EvaluatorConfig
from kbench_env.env.env import KBenchEnv

RELU_SOLUTION = read(ROOT / "tasks/solutions/cpu/level1/relu.py")


@pytest.fixture
def env(evaluator):
    e = gym.make("KBench-v0", task="level1/relu", evaluator=evaluator, max_turns=3, render_mode="ansi")
    yield e
    e.close()


def test_registered_and_checker_passes(evaluator):
    env = gym.make("KBench-v0", task="level1/relu", evaluator=evaluator)
    check_env(env.unwrapped)
    env.close()
    env.close()  # idempotent


def test_make_by_module_path(evaluator):
    env = gym.make("kbench_env:KBench-v0", task="level1/relu", evaluator=evaluator)
    obs, info = env.reset(seed=1)
    assert "ModelNew" in obs and info["task"] == "level1/relu"


def test_random_agent_20_steps(env):
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(20):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        assert isinstance(reward, float) and isinstance(terminated, bool) and isinstance(truncated, bool)
        assert info["eval"]["stage"] == "none"
        if terminated or truncated:
            env.reset()


def test_garbage_rejected_without_compiling(env):
    env.reset(seed=0)
    garbage = ["", "   ", "def f(:", "x" * 300_000, "import os\nprint('no model here')", "\x00\x01binary",
               "class ModelNew:\n    def forward(self, x):\n        return x\n"]  # no kernel: not a cpu candidate
    for action in garbage:
        obs, reward, *_ , info = env.step(action)
        ev = info["eval"]
        assert ev["stage"] == "none" and ev["error_stage"] == "screen"
        # nothing built, no worker started: the screen alone answered
        assert not ev["compiled"] and not ev["worker_seconds"] and set(ev["phase_seconds"]) <= {"screen"}, ev
        assert reward == pytest.approx(-0.6)
        assert "ERROR during screen" in obs
        env.reset()


def test_non_string_and_non_ascii_actions(env):
    env.reset(seed=0)
    obs, reward, *_ = env.step(12345)
    assert "string" in obs and reward == pytest.approx(-0.6)
    obs, reward, *_ = env.step(b"class ModelNew: pass")
    assert env.observation_space.contains(obs)
    obs, reward, *_ = env.step("# ünïcødé 核 ✓\nclass ModelNew:\n    pass\n")
    assert env.observation_space.contains(obs)


def test_correct_solution_episode(env):
    obs, info = env.reset(seed=0, options={"task": "level1/relu"})
    assert env.observation_space.contains(obs)
    assert "odd" not in obs and "131071" not in obs  # held-out configurations stay hidden
    assert env.render() == obs
    obs, reward, terminated, truncated, info = env.step(f"Here is my kernel:\n```python\n{RELU_SOLUTION}\n```\n")
    ev = info["eval"]
    assert ev["correct"] and ev["stage"] == "timed", obs
    assert reward > 0 and ev["reward"] == reward
    assert ev["speedup"] > 0 and info["best_speedup"] == ev["speedup"]
    assert "Speedup" in obs and "held-out configuration 1 of 2" in obs and "odd" not in obs
    json.dumps(info)  # the record is JSON-serialisable
    assert not terminated and not truncated


def test_turn_limit_truncates(env):
    env.reset(seed=0)
    flags = [env.step("nope")[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]


def test_target_speedup_terminates(evaluator):
    env = KBenchEnv(task="level1/relu", evaluator=evaluator, target_speedup=1e-6)
    env.reset(seed=0)
    _, reward, terminated, truncated, _ = env.step(RELU_SOLUTION)
    assert terminated and not truncated and reward > 0


def test_reward_callable(evaluator):
    from kbench_env.pipeline.evaluator import Evaluator

    ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, reward=lambda r: 42.0 if r.stage == "none" else 0.0)
    env = KBenchEnv(task="level1/relu", evaluator=ev)
    env.reset(seed=0)
    assert env.step("garbage")[1] == 42.0


def test_random_task_from_suite(evaluator):
    env = KBenchEnv(suite="level1", evaluator=evaluator)
    names = {env.reset(seed=s)[1]["task"] for s in range(5)}
    assert names and all(n.startswith("level1/") for n in names)


@pytest.mark.parametrize("conflict, named", [({"reward": "binary"}, "reward='binary'"),
                                             ({"device": "cuda"}, "device='cuda'"),
                                             ({"backend": "triton"}, "backend='triton'"),
                                             ({"reward": lambda r: 1.0}, "reward="),
                                             ({"config": EvaluatorConfig()}, "config=")])
def test_shared_evaluator_conflicting_argument_is_an_error(evaluator, conflict, named):
    with pytest.raises(ValueError, match="given evaluator") as err:
        KBenchEnv(task="level1/relu", evaluator=evaluator, **conflict)
    assert named in str(err.value)
    with pytest.raises(ValueError, match="given evaluator"):
        gym.make("KBench-v0", task="level1/relu", evaluator=evaluator, **conflict)
    with pytest.raises(ValueError, match="given evaluator"):
        gym.make_vec("KBench-v0", num_envs=2, task="level1/relu", evaluator=evaluator, **conflict)


def test_shared_evaluator_agreeing_arguments_accepted(evaluator):
    env = KBenchEnv(task="level1/relu", evaluator=evaluator, device="cpu", backend="cpu", reward="tiered",
                    rules="strict")
    assert env.evaluator is evaluator
    env.close()


def test_make_vec_passes_evaluator_options_to_its_evaluator(evaluator):
    options = EvaluatorConfig.from_options(check_calls=1, noise=0.25, spare_worker=False, cache_dir=evaluator.cache_dir)
    venv = gym.make_vec("KBench-v0", num_envs=2, task="level1/relu", device="cpu", reward="binary", config=options,
                        max_turns=2)
    try:
        ev = venv.evaluator
        assert all(e.evaluator is ev for e in venv.envs) and all(e.max_turns == 2 for e in venv.envs)
        assert (ev.check_calls, ev.noise, ev._spares) == (1, 0.25, None)
        assert ev.reward_fn is not evaluator.reward_fn
    finally:
        venv.close()


def test_docstring_documents_every_argument():
    import inspect

    names = set(inspect.signature(KBenchEnv.__init__).parameters) - {"self"}
    rows = {line.split("|")[1].strip().strip("`") for line in KBenchEnv.__doc__.splitlines()
            if line.strip().startswith("| `")}
    assert names <= rows, f"undocumented: {sorted(names - rows)}"
    for section in ("Description", "Action Space", "Observation Space", "Rewards", "Starting State", "Episode End",
                    "Arguments", "Vector Environment", "Render Mode", "Version History"):
        assert f"## {section}\n" in KBenchEnv.__doc__
