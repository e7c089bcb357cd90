"""``KBench-v0`` as an Inspect task (the [inspect] extra: ``pip install kbench[inspect]``, inspect-ai).

One sample per task of the suite; each sample is one episode of the env::

    inspect eval kbench_apps/integrations/inspect_task.py --model openai/gpt-4o -T suite=level1 -T max_turns=2
    inspect eval kbench_apps/integrations/inspect_task.py --model hf/runs/tiny -T device=cuda   # a local folder

    from inspect_ai import eval
    from kbench_apps.integrations.inspect_task import kbench
    eval(kbench(suite="default", device="cpu", max_turns=2), model="openai/gpt-4o")

- **Dataset**: a sample's input is what the env's ``reset`` shows the policy for that task (the observation text:
  reference program, shown configurations, hardware, action format); held-out configurations never reach it. The
  system message is the env's ``SYSTEM_PROMPT`` (``system_prompt=False`` leaves it out).
- **Solver** (``kbench_episode``): the model answers, the reply is the action of ``env.step`` (a fenced code block
  in it is what is evaluated), the observation (the env's feedback) comes back as the next user message, until the
  env terminates (``target_speedup`` reached) or truncates (``max_turns`` attempts) the episode.
- **Scorer** (``kbench_scorer``): ``correct`` (some attempt correct with no integrity flag), ``speedup`` (the
  env's ``best_speedup``: the best verified speedup of the episode, 0 when none), ``fast_p`` (KernelBench's fast_p:
  correct and speedup > p, p = 1 by default: fast_1; the measured speedup, as KernelBench counts it, where the
  reward pays a speedup whose confidence interval reaches 1 as parity) and ``reward`` (the best attempt's reward
  under the env's ``reward`` preset). Metrics: the mean (and its standard error) of each, and the geometric mean speedup of the
  samples with a verified speedup (``geomean_speedup``).

A local model folder (``hf/<folder>``) is loaded a second time by Inspect's model-info lookup unless it is registered
first: ``inspect_ai.model.set_model_info("hf/<folder>", ModelInfo(context_length=...))``.

Local episodes share one Evaluator (one build cache and device lock; closed when the process ends). With ``url`` the
episodes run on a ``kbench serve`` server (``gym.make("KBench-v0", url=...)``), whose device, backend, rules and
reward are the server's; its token comes from ``$KBENCH_TOKEN`` only, because Inspect writes a task's arguments
into its log. Without ``--expose-info`` on the server an attempt's correctness is known only from a verified
speedup (``best_speedup``).
"""

from __future__ import annotations

import math
import threading
import weakref

import anyio
import gymnasium as gym
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import Metric, SampleScore, Score, Target, mean, metric, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver

import kbench_env  # noqa: F401  (registers KBench-v0)
from kbench_env.device import resolve_device
from kbench_env.env.prompt import SYSTEM_PROMPT
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.reward import PRESETS
from kbench_env.tasks.suite import load_suite
from kbench_env.tasks.task import Task as KernelTask

STORE_KEY = "kbench"


class EnvMaker:
    """Makes each episode's env through ``gym.make("KBench-v0", ...)``: local envs share one Evaluator, made on first
    use; remote ones (``url``) are each a session on the server."""

    def __init__(self, *, suite: str, device: str, max_turns: int, backend: str | None, reward: str | None,
                 rules: str | None, format: str | None, target_speedup: float | None, dtype: str | None,
                 url: str | None, env_options: dict | None):
        self.url = url
        self.common = {"suite": suite, "max_turns": max_turns, "target_speedup": target_speedup}
        if url is not None:
            given = {"reward": reward, "format": format, "dtype": dtype, **(env_options or {})}
            if any(v is not None for v in given.values()):
                named = ", ".join(k for k, v in given.items() if v is not None)
                raise ValueError(f"with url= the server's Evaluator decides {named}: start kbench serve with them")
            self.remote = {"device": device, "backend": backend, "rules": rules}
        else:
            self.evaluator_args = {"device": device, "backend": backend, "reward": reward or "tiered",
                                   "rules": rules or "strict", "format": format or "kernelbench",
                                   **(env_options or {})}
            self.dtype = dtype
        self._evaluator: Evaluator | None = None
        self._lock = threading.Lock()
        self.tasks: dict[str, KernelTask] = {}

    def evaluator(self) -> Evaluator:
        with self._lock:
            if self._evaluator is None:
                self._evaluator = Evaluator(**self.evaluator_args)
                weakref.finalize(self, self._evaluator.close)
            return self._evaluator

    def make(self) -> gym.Env:
        if self.url is not None:
            return gym.make("KBench-v0", url=self.url, **self.common, **self.remote)
        return gym.make("KBench-v0", evaluator=self.evaluator(), dtype=self.dtype, **self.common)

    def reset(self, env: gym.Env, name: str, seed: int | None):
        """``env.reset`` on the task ``name``: the Task itself for a local env (no suite lookup per episode), its
        name for a server, which looks it up in its own suite."""
        chosen = self.tasks.get(name, name) if self.url is None else name
        return env.reset(seed=seed, options={"task": chosen})


def kbench_dataset(maker: EnvMaker, suite: str, device: str, dtype: str | None, seed: int | None) -> MemoryDataset:
    """One sample per task of ``suite`` with a configuration for ``device``; its input is ``reset``'s observation."""
    tasks = [t for t in load_suite(suite, dtype=dtype) if t.configs_for(resolve_device(device))]
    if not tasks:
        raise ValueError(f"suite {suite!r} has no task with a configuration for {device}")
    maker.tasks = {t.name: t for t in tasks}
    env = maker.make()
    try:
        samples = [Sample(id=t.name, input=maker.reset(env, t.name, seed)[0], metadata={"task": t.name})
                   for t in tasks]
    finally:
        env.close()
    return MemoryDataset(samples, name=f"kbench:{suite}")


def turn_record(turn: int, reward: float, info: dict) -> dict:
    """What the score keeps of one attempt: the researcher's record (``info["eval"]``) condensed to its verdict;
    ``correct`` and ``speedup`` are None where the env gave no record (a server without --expose-info)."""
    record = info.get("eval")
    out = {"turn": turn, "reward": float(reward), "correct": None, "speedup": None}
    if record is not None:
        out.update(correct=bool(record["correct"] and not record["integrity_flags"]), speedup=record["speedup"],
                   stage=record["stage"], error_stage=record["error_stage"],
                   integrity_flags=list(record["integrity_flags"]), eval_seconds=record["eval_seconds"])
    return out


@solver
def kbench_episode(maker: EnvMaker, seed: int | None = None, system_prompt: bool = True) -> Solver:
    """One env episode per sample: generate, ``env.step`` the reply, the observation as the next user message."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        env = await anyio.to_thread.run_sync(maker.make)
        try:
            prompt, info = await anyio.to_thread.run_sync(maker.reset, env, state.metadata["task"], seed)
            state.messages = ([ChatMessageSystem(content=SYSTEM_PROMPT)] if system_prompt else []) + [
                ChatMessageUser(content=prompt)]
            turns: list[dict] = []
            while not state.completed:
                state = await generate(state)
                obs, reward, terminated, truncated, info = await anyio.to_thread.run_sync(
                    env.step, state.output.completion)
                turns.append(turn_record(len(turns) + 1, reward, info))
                if terminated or truncated:
                    break
                state.messages.append(ChatMessageUser(content=obs))
            state.store.set(STORE_KEY, {"turns": turns, "best_speedup": info.get("best_speedup"),
                                        "feedback": obs if turns else None})
        finally:
            await anyio.to_thread.run_sync(env.close)
        return state

    return solve


@metric
def geomean_speedup() -> Metric:
    """Geometric mean of the speedups of the samples with a verified speedup (0 stands for none); 0 if none has."""

    def compute(scores: list[SampleScore]) -> float:
        values = [float(s.score.as_float()) for s in scores]
        values = [v for v in values if v > 0]
        return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 0.0

    return compute


@scorer(metrics={"correct": [mean(), stderr()], "fast_p": [mean(), stderr()], "speedup": [geomean_speedup()],
                 "reward": [mean(), stderr()]})
def kbench_scorer(fast_p: float = 1.0):
    """Scores the episode ``kbench_episode`` played (module docstring): correct, speedup, fast_p, reward."""

    async def score(state: TaskState, target: Target) -> Score:
        episode = state.store.get(STORE_KEY) or {"turns": [], "best_speedup": None, "feedback": None}
        turns, best = episode["turns"], episode["best_speedup"]
        known = [t["correct"] for t in turns if t["correct"] is not None]
        correct = any(known) if known else best is not None
        speedup = float(best) if best is not None else 0.0
        rewards = [t["reward"] for t in turns]
        value = {"correct": float(correct), "fast_p": float(correct and speedup > fast_p), "speedup": speedup,
                 "reward": max(rewards) if rewards else 0.0}
        return Score(value=value, answer=state.output.completion if turns else None,
                     explanation=episode["feedback"],
                     metadata={"turns": turns, "best_speedup": best, "fast_p_threshold": fast_p})

    return score


@task
def kbench(suite: str = "default", device: str = "cpu", max_turns: int = 4, backend: str | None = None,
           reward: str | None = None, rules: str | None = None, format: str | None = None,
           target_speedup: float | None = None, fast_p: float = 1.0, seed: int | None = None,
           dtype: str | None = None, url: str | None = None, system_prompt: bool = True,
           env_options: dict | None = None) -> Task:
    """KBench-v0's tasks as an Inspect task (module docstring).

    Args:
        suite: a suite spec as ``kbench tasks --suite`` takes it ("default", "level1", a folder, a comma list).
        device: "cpu", "cuda", "cuda:N" (with ``url``: the server's, checked against it).
        max_turns: attempts per episode (``KBench-v0``'s ``max_turns``).
        backend, rules, format: the env's (None: its defaults); with ``url`` only the server's values.
        reward: the env's reward preset ("tiered", "binary", "speedup", "kevin"); None: "tiered" (with ``url``: the
            server's).
        target_speedup: the env ends an episode at a correct attempt this much faster.
        fast_p: the speedup a correct episode must exceed to count in ``fast_p``.
        seed: ``reset``'s seed for every episode (None: fresh).
        dtype: float32, float16 or bfloat16 for plain KernelBench files' configurations.
        url: a ``kbench serve`` server to run the episodes on (its token in ``$KBENCH_TOKEN``).
        system_prompt: send the env's system prompt as the system message.
        env_options: other Evaluator options of a local env (``timing``, ``time_candidates``, ``baseline``, ...).
    """
    if reward is not None and reward not in PRESETS:
        raise ValueError(f"reward must be one of the env's presets {sorted(PRESETS)}, got {reward!r}")
    maker = EnvMaker(suite=suite, device=device, max_turns=max_turns, backend=backend, reward=reward, rules=rules,
                     format=format, target_speedup=target_speedup, dtype=dtype, url=url, env_options=env_options)
    return Task(dataset=kbench_dataset(maker, suite, device, dtype, seed),
                solver=kbench_episode(maker, seed=seed, system_prompt=system_prompt),
                scorer=kbench_scorer(fast_p=fast_p), name="kbench")
