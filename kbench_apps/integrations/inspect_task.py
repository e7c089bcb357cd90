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
  reward pays a speedup whose confidence interval reaches 1 as parity) and ``reward`` (``episode_reward`` over the
  turns' env rewards under the env's ``reward`` preset: the best turn's less ``turn_cost`` per extra turn, as
  training and the other adapters pay). Metrics: the mean (and its standard error) of each, and the geometric mean
  speedup of the samples with a verified speedup (``geomean_speedup``).

The envs come from ``episode.shared_source`` (kbench_apps/integrations/episode.py): in this process, one Evaluator
for every episode of the same configuration (one build cache, one device lock; closed at exit); with ``url``,
sessions on a ``kbench serve`` server, whose device, backend, rules and reward are the server's. The server's token
comes from ``$KBENCH_TOKEN`` only, because Inspect writes a task's arguments into its log. The score reads each
attempt's researcher's record (``info["eval"]``, never shown to the model); from a server started without
``--expose-info`` there is none, and an episode counts as correct only with a verified speedup (``best_speedup``).

A local model folder (``hf/<folder>``) is loaded a second time by Inspect's model-info lookup unless it is registered
first: ``inspect_ai.model.set_model_info("hf/<folder>", ModelInfo(context_length=...))``.
"""

from __future__ import annotations

import math

import anyio
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import Metric, SampleScore, Score, Target, mean, metric, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver

from kbench_apps.integrations.episode import SYSTEM_PROMPT, EnvSource, shared_source
from kbench_env.machine.device import resolve_device
from kbench_env.pipeline import reward as rewards
from kbench_env.tasks.suite import load_suite
from kbench_env.tasks.task import Task as KernelTask

STORE_KEY = "kbench"


class Episodes:
    """The envs of the task's episodes (``EnvSource``: in this process one Evaluator for all, or sessions on a
    server) and the suite's tasks, which a local env resets on as Task objects (no suite lookup per episode)."""

    def __init__(self, source: EnvSource, tasks: list[KernelTask], max_turns: int):
        self.source, self.tasks, self.max_turns = source, {t.name: t for t in tasks}, max_turns

    def make(self):
        return self.source.make(max_turns=self.max_turns)

    def reset(self, env, name: str, seed: int | None):
        return env.reset(seed=seed, options={"task": self.tasks[name] if self.source.url is None else name})

    def dataset(self, seed: int | None, name: str) -> MemoryDataset:
        """One sample per task; its input is ``reset``'s observation for that task."""
        env = self.make()
        try:
            samples = [Sample(id=n, input=self.reset(env, n, seed)[0], metadata={"task": n}) for n in self.tasks]
        finally:
            env.close()
        return MemoryDataset(samples, name=name)


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
def kbench_episode(episodes: Episodes, seed: int | None = None, system_prompt: bool = True) -> Solver:
    """One env episode per sample: generate, ``env.step`` the reply, the observation as the next user message."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        env = await anyio.to_thread.run_sync(episodes.make)
        try:
            prompt, info = await anyio.to_thread.run_sync(episodes.reset, env, state.metadata["task"], seed)
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
def kbench_scorer(fast_p: float = 1.0, episode_reward: str = "best", turn_cost: float = 0.02):
    """Scores the episode ``kbench_episode`` played (module docstring): correct, speedup, fast_p, reward."""

    async def score(state: TaskState, target: Target) -> Score:
        episode = state.store.get(STORE_KEY) or {"turns": [], "best_speedup": None, "feedback": None}
        turns, best = episode["turns"], episode["best_speedup"]
        known = [t["correct"] for t in turns if t["correct"] is not None]
        correct = any(known) if known else best is not None
        speedup = float(best) if best is not None else 0.0
        turn_rewards = [t["reward"] for t in turns]
        value = {"correct": float(correct), "fast_p": float(correct and speedup > fast_p), "speedup": speedup,
                 "reward": rewards.episode_reward(turn_rewards, episode_reward, turn_cost) if turns else 0.0}
        return Score(value=value, answer=state.output.completion if turns else None,
                     explanation=episode["feedback"],
                     metadata={"turns": turns, "best_speedup": best, "fast_p_threshold": fast_p})

    return score


@task
def kbench(suite: str = "default", device: str = "cpu", max_turns: int = 4, backend: str | None = None,
           reward: str | None = None, rules: str | None = None, format: str | None = None,
           target_speedup: float | None = None, fast_p: float = 1.0, episode_reward: str = "best",
           turn_cost: float = 0.02, seed: int | None = None, dtype: str | None = None, url: str | None = None,
           system_prompt: bool = True, env_options: dict | None = None) -> Task:
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
        episode_reward, turn_cost: the episode's ``reward`` score from its turns' env rewards
            (``kbench_env.pipeline.reward.episode_reward``: "best" or "last" turn, less ``turn_cost`` per extra turn).
        seed: ``reset``'s seed for every episode (None: fresh).
        dtype: float32, float16 or bfloat16 for plain KernelBench files' configurations.
        url: a ``kbench serve`` server to run the episodes on (its token in ``$KBENCH_TOKEN``).
        system_prompt: send the env's system prompt as the system message.
        env_options: other Evaluator options of a local env (``timing``, ``time_candidates``, ``baseline``, ...).
    """
    if reward is not None and reward not in rewards.PRESETS:
        raise ValueError(f"reward must be one of the env's presets {sorted(rewards.PRESETS)}, got {reward!r}")
    rewards.episode_reward([0.0], episode_reward, turn_cost)  # the mode's ValueError now, not after the episodes
    options = {"device": device, "backend": backend, "reward": reward, "rules": rules, "format": format,
               "target_speedup": target_speedup, "dtype": dtype, **(env_options or {})}
    source = shared_source(url=url, suite=suite, **{k: v for k, v in options.items() if v is not None})
    tasks = [t for t in load_suite(suite, dtype=dtype) if t.configs_for(resolve_device(device))]
    if not tasks:
        raise ValueError(f"suite {suite!r} has no task with a configuration for {device}")
    episodes = Episodes(source, tasks, max_turns)
    return Task(dataset=episodes.dataset(seed, f"kbench:{suite}"),
                solver=kbench_episode(episodes, seed=seed, system_prompt=system_prompt),
                scorer=kbench_scorer(fast_p=fast_p, episode_reward=episode_reward, turn_cost=turn_cost),
                name="kbench")
