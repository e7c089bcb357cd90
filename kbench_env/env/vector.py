"""``gym.make_vec("KBench-v0", num_envs=N)``: N episodes that share one Evaluator (one build cache, one pool,
one device lock) and evaluate each step's N actions together through ``Evaluator.evaluate_many``, instead of N
separate environments each starting their own evaluation machinery.

Autoreset follows Gymnasium's default (next-step): after an episode ends, that sub-environment's next ``step``
resets it, returns the new prompt with reward 0, and ignores the action.
"""

from __future__ import annotations

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from kbench_env.env.env import KBenchEnv
from kbench_env.config import EvaluatorConfig
from kbench_env.pipeline.evaluator import Evaluator


class KBenchVectorEnv(VectorEnv):
    metadata = {"render_modes": ["ansi"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, evaluator: Evaluator | None = None, device: str | None = None,
                 backend: str | None = None, reward=None, max_workers: int | None = None,
                 render_mode: str | None = None, rules: str | None = None, format: str | None = None,
                 config: EvaluatorConfig | None = None, **env_kwargs):
        """``env_kwargs``: KBenchEnv's own arguments (``task``, ``suite``, ``max_turns``, ...)."""
        self._owns_evaluator = evaluator is None
        if evaluator is None:
            evaluator = Evaluator(config, device=device, backend=backend, reward=reward, rules=rules, format=format)
            config = None  # the evaluator's own, made with it
        self.evaluator = evaluator
        # Each env checks that these agree with the shared evaluator (a conflict is an error, never ignored).
        self.envs = [KBenchEnv(evaluator=evaluator, device=device, backend=backend, reward=reward,
                               render_mode=render_mode, rules=rules, format=format, config=config, **env_kwargs)
                     for _ in range(num_envs)]
        self.num_envs = num_envs
        self.max_workers = max_workers
        self.render_mode = render_mode
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._needs_reset = np.zeros(num_envs, dtype=bool)

    def reset(self, *, seed=None, options=None):
        seeds = [None] * self.num_envs if seed is None else (
            list(seed) if isinstance(seed, (list, tuple)) else [seed + i for i in range(self.num_envs)])
        obs, infos = [], {}
        for i, (env, s) in enumerate(zip(self.envs, seeds)):
            o, info = env.reset(seed=s, options=options)
            obs.append(o)
            infos = self._add_info(infos, info, i)
        self._needs_reset[:] = False
        return tuple(obs), infos

    def step(self, actions):
        actions = list(actions)
        obs = [None] * self.num_envs
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terms = np.zeros(self.num_envs, dtype=bool)
        truncs = np.zeros(self.num_envs, dtype=bool)
        infos: dict = {}
        live = []
        for i, env in enumerate(self.envs):
            if self._needs_reset[i]:
                obs[i], info = env.reset()
                infos = self._add_info(infos, info, i)
            else:
                live.append(i)
        results = self.evaluator.evaluate_many([(self.envs[i].task, actions[i]) for i in live],
                                               max_workers=self.max_workers)
        for i, result in zip(live, results):
            o, r, te, tr, info = self.envs[i].record(result)
            obs[i], rewards[i], terms[i], truncs[i] = o, r, te, tr
            infos = self._add_info(infos, info, i)
        self._needs_reset = terms | truncs
        return tuple(obs), rewards, terms, truncs, infos

    def render(self):
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs):
        for env in self.envs:
            env.close()
        if self._owns_evaluator:
            self.evaluator.close()
