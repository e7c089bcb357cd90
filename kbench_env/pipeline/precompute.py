"""A task's reference timed ahead of any candidate (``kbench baseline``): the inputs a candidate's evaluation with
the same seed would get, timed through the evaluator's baselines and so into its reference cache, holding the
device as an evaluation does."""

from __future__ import annotations

from kbench_env.pipeline.check import instantiate
from kbench_env.tasks.task import Task


def time_reference(ev, task: Task, seed: int = 0) -> tuple[int, int]:
    """Time ``task``'s reference on every configuration for ``ev``'s device. Returns ``(timed, cached)``:
    configurations measured now and configurations already known (in memory or in the reference cache)."""
    configs = task.require_configs(ev.device)
    prepared: dict = {}
    for i, cfg in enumerate(configs):
        instantiate(task, cfg, seed, i, prepared, ev.device)
    before = ev.baselines.timed
    with ev._device_lock, ev._trusted_threads():
        ev.baselines.times(task, configs, prepared, seed)
    timed = ev.baselines.timed - before
    return timed, len(configs) - timed
