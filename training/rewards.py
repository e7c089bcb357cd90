"""TRL reward functions backed by the kbench Evaluator.

TRL's contract: a plain callable ``f(prompts, completions, **kwargs) -> list[float]``, with the dataset's columns
(here ``task``) and TRL's helpers (``log_metric``, ``log_extra``, ``trainer_state``) among the keyword arguments.

- ``KBenchReward`` (single turn): evaluates every completion of a generation batch in one
  ``Evaluator.evaluate_many`` call (builds run concurrently on the CPU cores, the device times one candidate at a
  time) and returns each ``EvalResult.reward``: exactly the reward ``KBench-v0`` pays for that attempt.
- ``EpisodeReward`` (multi turn): the multi-turn rollout (``kbench_training.rollout``) already ran the episodes against the
  environment; this returns each episode's reward from the rollout's ``kbench_episode`` field and logs the same
  metrics per turn.

Metrics go through TRL's ``log_metric`` hook (averaged per logging step, printed and sent to the trainer's loggers
next to ``reward`` and ``kl``), and into running totals on the object (``totals``, ``summary()``).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict

from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.result import EvalResult
from kbench_env.tasks.task import Task, geomean


def completion_text(completion) -> str:
    """The text of one TRL completion: a string (standard format) or a list of messages (conversational format,
    where the last assistant message is the answer)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    for message in reversed(list(completion or [])):
        if message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content") or ""
        if isinstance(content, list):  # content blocks
            content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
        return str(content)
    return ""


def eval_metrics(results: list, prefix: str = "kbench/") -> dict[str, float]:
    """Rates and speedups over a batch of EvalResults (or their dicts). Speedup figures only when some result is
    correct and timed, so an all-garbage batch logs no fake zero speedup."""
    rs = [r if isinstance(r, dict) else r.to_dict() for r in results]
    n = max(1, len(rs))
    m = {
        f"{prefix}screen_pass_rate": sum(r["stage"] != "none" for r in rs) / n,
        f"{prefix}compile_rate": sum(bool(r["compiled"]) for r in rs) / n,
        f"{prefix}correct_rate": sum(bool(r["correct"]) for r in rs) / n,
        f"{prefix}integrity_flag_rate": sum(bool(r["integrity_flags"]) for r in rs) / n,
        f"{prefix}eval_seconds_mean": sum(float(r.get("eval_seconds") or 0.0) for r in rs) / n,
    }
    speedups = [float(r["speedup"]) for r in rs if r["correct"] and isinstance(r.get("speedup"), (int, float))
                and math.isfinite(r["speedup"]) and r["speedup"] > 0]
    m[f"{prefix}fast_1_rate"] = sum(s > 1.0 for s in speedups) / n
    if speedups:
        m[f"{prefix}speedup_mean"] = sum(speedups) / len(speedups)
        m[f"{prefix}speedup_geomean"] = geomean(speedups)
    return m


class _Logged:
    """Running totals of logged metrics, for printing without a logger."""

    def __init__(self):
        self.totals: dict[str, list[float]] = defaultdict(list)

    def _log(self, metrics: dict[str, float], log_metric=None) -> None:
        for k, v in metrics.items():
            self.totals[k].append(float(v))
            if log_metric is not None:
                log_metric(k, float(v))

    def summary(self) -> dict[str, float]:
        """Mean of every metric over all batches seen so far."""
        return {k: sum(v) / len(v) for k, v in sorted(self.totals.items()) if v}


class KBenchReward(_Logged):
    """Single-turn reward: the env's reward of each completion, all completions of a batch evaluated together.

    Args:
        evaluator: the Evaluator (its reward preset is the reward).
        tasks: the tasks the dataset's ``task`` column names.
        max_workers: candidates in flight at once in ``evaluate_many`` (default: the evaluator's build pool).
        keep_history: keep ``(task, text, EvalResult)`` of every evaluation in ``history`` (tests, debugging).
    """

    __name__ = "kbench"

    def __init__(self, evaluator: Evaluator, tasks: list[Task], max_workers: int | None = None,
                 keep_history: bool = False):
        super().__init__()
        self.evaluator = evaluator
        self.tasks = {t.name: t for t in tasks}
        self.max_workers = max_workers
        self.keep_history = keep_history
        self.history: list[tuple[str, str, EvalResult]] = []

    def __call__(self, prompts=None, completions=None, task=None, log_metric=None, log_extra=None,
                 **kwargs) -> list[float]:
        if task is None:
            raise ValueError("the dataset needs a 'task' column (kbench_training.data.build_dataset makes one)")
        texts = [completion_text(c) for c in completions]
        items = [(self.tasks[name], text) for name, text in zip(task, texts)]
        t0 = time.perf_counter()
        results = self.evaluator.evaluate_many(items, max_workers=self.max_workers)
        metrics = eval_metrics(results)
        metrics["kbench/batch_eval_seconds"] = time.perf_counter() - t0
        self._log(metrics, log_metric)
        if log_extra is not None:
            log_extra("kbench_stage", [r.stage for r in results])
            log_extra("kbench_error", [(r.error or "")[:200] for r in results])
        if self.keep_history:
            self.history.extend((name, text, r) for name, text, r in zip(task, texts, results))
        return [float(r.reward) for r in results]


class EpisodeReward(_Logged):
    """Multi-turn reward: each episode's reward, as computed by the rollout (``kbench_training.rollout.episode_reward``)
    from the env's per-turn rewards. Logs metrics of the first turn, of every turn, and of the episode's best."""

    __name__ = "kbench_episode"

    def __call__(self, prompts=None, completions=None, kbench_episode=None, log_metric=None, log_extra=None,
                 **kwargs) -> list[float]:
        if kbench_episode is None:
            raise ValueError("EpisodeReward needs the multi-turn rollout (kbench_training.rollout.MultiTurnRollout)")
        eps = list(kbench_episode)
        first = [e["results"][0] for e in eps]
        every = [r for e in eps for r in e["results"]]
        best = [max(e["results"], key=lambda r: r["reward"]) for e in eps]
        metrics = {**eval_metrics(first, "kbench/turn1/"), **eval_metrics(every, "kbench/all_turns/"),
                   **eval_metrics(best, "kbench/best/")}
        n = max(1, len(eps))
        metrics["kbench/turns_mean"] = sum(e["turns"] for e in eps) / n
        metrics["kbench/reward_turn1_mean"] = sum(e["turn_rewards"][0] for e in eps) / n
        metrics["kbench/reward_best_mean"] = sum(max(e["turn_rewards"]) for e in eps) / n
        metrics["kbench/improved_rate"] = sum(max(e["turn_rewards"]) > e["turn_rewards"][0] for e in eps) / n
        self._log(metrics, log_metric)
        if log_extra is not None:
            log_extra("kbench_turn_rewards", [" ".join(f"{x:.2f}" for x in e["turn_rewards"]) for e in eps])
        return [float(e["reward"]) for e in eps]
