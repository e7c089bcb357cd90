"""One ``KBench-v0`` episode driven by a text policy, for the framework adapters (no framework imported here).

An adapter turns a framework's conversation into env steps: the task's prompt is what ``reset`` shows, each model
reply is an action, the observation text is the next user message, and the episode ends when the env terminates
or truncates it. ``EnvSource`` makes the envs: in this process (``gym.make("KBench-v0", ...)``, every episode's env
sharing one Evaluator: one build cache, one device lock), or on a ``kbench serve`` server
(``gym.make("KBench-v0", url=..., token=...)``, one server session per episode). ``Episode`` plays one episode and
keeps its per-turn rewards; its scalar is ``kbench_env.pipeline.reward.episode_reward``, the rule GRPO training
pays with. What an episode hands back to a framework is what a policy may read: the observation text and the
episode's bookkeeping, never ``info["eval"]`` (the researcher's record, which names the held-out configurations).
"""

from __future__ import annotations

import atexit
import json
import threading
from typing import NamedTuple

import gymnasium as gym

import kbench_env  # noqa: F401  (registers KBench-v0)
from kbench_env.env.prompt import SYSTEM_PROMPT
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.reward import episode_reward
from kbench_env.tasks.suite import load_suite

#: ``gym.make`` arguments that belong to one episode's env; every other argument is the Evaluator's.
EPISODE_OPTIONS = ("suite", "max_turns", "target_speedup", "dtype")

__all__ = ["SYSTEM_PROMPT", "EnvSource", "Episode", "Step", "close_shared", "public_info", "shared",
           "shared_evaluator", "shared_source"]


def public_info(info: dict) -> dict:
    """``info`` without the researcher's record (``eval``): what a trainer may log beside the policy's text."""
    return {k: v for k, v in info.items() if k != "eval"}


class EnvSource:
    """Makes ``KBench-v0`` envs for episodes.

    Args:
        url, token: a ``kbench serve`` server (the token defaults to ``$KBENCH_TOKEN``); None: in this process.
        **options: ``gym.make("KBench-v0", ...)`` arguments: the episode's (``suite``, ``max_turns``,
            ``target_speedup``, ``dtype``) and, in this process, the Evaluator's (``device``, ``backend``,
            ``reward``, ``rules``, ``format``, ``timing``, ...), given once to the one Evaluator all episodes share.

    A source made here owns its Evaluator and closes it; one from ``shared_source`` uses the process's
    ``shared_evaluator`` for its Evaluator options instead.
    """

    def __init__(self, url: str | None = None, token: str | None = None, **options):
        self.url, self.token = url, token
        self.episode_options = {k: options.pop(k) for k in EPISODE_OPTIONS if k in options}
        self.evaluator_options = options
        self.shared = False  # set by shared_source
        self._own: Evaluator | None = None  # in this process, unshared: the Evaluator every episode's env shares
        self._lock = threading.Lock()

    def make(self, **episode_options) -> gym.Env:
        """A fresh env (``episode_options`` over the source's, e.g. ``max_turns``); the caller closes it."""
        kwargs = {**self.episode_options, **episode_options}
        if self.url is not None:
            return gym.make("KBench-v0", url=self.url, token=self.token, **kwargs, **self.evaluator_options)
        return gym.make("KBench-v0", evaluator=self._evaluator(), **kwargs)

    def _evaluator(self) -> Evaluator:
        if self.shared:
            return shared_evaluator(**self.evaluator_options)
        with self._lock:
            if self._own is None:
                self._own = Evaluator(**self.evaluator_options)
            return self._own

    def task_names(self, tasks: list[str] | None = None) -> list[str]:
        """``tasks``, or the suite's task names; in this process only those with a configuration for the
        Evaluator's device (a server refuses the others at reset)."""
        if tasks:
            return list(tasks)
        found = load_suite(self.episode_options.get("suite", "default"), dtype=self.episode_options.get("dtype"))
        if self.url is None:
            device = self._evaluator().device
            found = [t for t in found if t.configs_for(device)]
        return [t.name for t in found]

    def prompt(self, task: str) -> str:
        """The observation ``reset`` shows for ``task``: the prompt a policy starts an episode from."""
        env = self.make()
        try:
            return env.reset(options={"task": task})[0]
        finally:
            env.close()

    def close(self) -> None:
        """Close the source's own Evaluator (a shared source's is closed by ``close_shared``)."""
        with self._lock:
            if self._own is not None:
                self._own.close()
                self._own = None


# The process's one cache of what the adapters share: (kind, options as JSON) -> the object made for them.
_SHARED: dict[tuple[str, str], object] = {}
_SHARED_LOCK = threading.Lock()


def shared(kind: str, options: dict, make):
    """The process's one object of ``kind`` for ``options`` (JSON-like values), ``make()`` the first time; it has
    a ``close()``, called by ``close_shared``. ``shared_source`` and ``shared_evaluator`` keep theirs here, and
    so does verl's reward for the evaluators it makes otherwise (a factory's, a server's)."""
    key = (kind, json.dumps(options, sort_keys=True, default=repr))
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = make()
        return _SHARED[key]


def shared_evaluator(**options) -> Evaluator:
    """The process's one ``Evaluator(**options)`` (its keyword options, JSON-like values): every shared source
    with these Evaluator options, and verl's reward and interaction, evaluate on it (one build cache, one device
    lock, one set of workers)."""
    return shared("evaluator", options, lambda: Evaluator(**options))


def shared_source(**config) -> EnvSource:
    """The process's one ``EnvSource`` for ``config`` (``EnvSource``'s arguments, JSON-like values): frameworks
    that make an env object per episode (SkyRL-gym) or load the tasks apart from running them (verifiers) reach
    the same Evaluator through it; in this process that is ``shared_evaluator`` of its Evaluator options, so
    sources that differ only in their episodes' options (suite, max_turns, ...) share one. Closed at exit."""
    def make() -> EnvSource:
        source = EnvSource(**config)
        source.shared = True
        return source

    return shared("source", config, make)


@atexit.register
def close_shared() -> None:
    """Close everything shared (the Evaluators' workers and builders); a later ``shared_source`` or
    ``shared_evaluator`` makes a new one."""
    with _SHARED_LOCK:
        for thing in _SHARED.values():
            thing.close()
        _SHARED.clear()


class Step(NamedTuple):
    """One attempt's outcome: the observation text (the next user message unless ``done``), the env's reward,
    its termination and truncation, and ``info`` without the researcher's record."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


class Episode:
    """One episode of ``task`` on an env from ``source`` (``max_turns`` and the like over the source's)."""

    def __init__(self, source: EnvSource, task: str, **episode_options):
        self.task = task
        self.env = source.make(**episode_options)
        self.turn_rewards: list[float] = []
        self.info: dict = {}
        self.done = False

    def reset(self, seed: int | None = None) -> str:
        """Start the episode; returns the prompt."""
        obs, info = self.env.reset(seed=seed, options={"task": self.task})
        self.turn_rewards, self.info, self.done = [], public_info(info), False
        return obs

    def step(self, reply: str) -> Step:
        """Evaluate one model reply (a fenced code block in it is the source) as the next attempt."""
        if self.done:
            raise RuntimeError(f"the episode of {self.task} is over: reset it first")
        obs, reward, terminated, truncated, info = self.env.step(reply)
        self.turn_rewards.append(float(reward))
        self.info = public_info(info)
        self.done = bool(terminated or truncated)
        return Step(obs, float(reward), bool(terminated), bool(truncated), self.info)

    def reward(self, mode: str = "best", turn_cost: float = 0.02) -> float:
        """The episode's scalar from its turns so far (``episode_reward``)."""
        return episode_reward(self.turn_rewards, mode, turn_cost)

    def metrics(self) -> dict[str, float]:
        """Numbers a trainer logs per episode: turns, the first, last and best turn's reward, the best verified
        speedup (0 until a correct, unflagged attempt was timed)."""
        r = self.turn_rewards
        out = {"turns": float(len(r)), "best_speedup": float(self.info.get("best_speedup") or 0.0)}
        if r:
            out.update(first_reward=r[0], last_reward=r[-1], best_reward=max(r))
        return out

    def close(self) -> None:
        self.env.close()
