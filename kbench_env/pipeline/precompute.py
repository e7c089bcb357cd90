"""A task's reference timed ahead of any candidate (``kbench baseline``): the inputs a candidate's evaluation with
the same seed would get, timed through the evaluator's baselines and so into its reference cache, holding the
device as an evaluation does."""

from __future__ import annotations

from kbench_env.pipeline.baseline import Baselines
from kbench_env.pipeline.check import instantiate
from kbench_env.pipeline.device_hold import DeviceHold
from kbench_env.tasks.task import Task


def time_reference(baselines: Baselines, hold: DeviceHold, task: Task, seed: int = 0) -> tuple[int, int]:
    """Time ``task``'s reference on every configuration into ``baselines`` (an Evaluator's), holding its device
    alone (``hold``: Evaluator.device_hold). Returns ``(timed, cached)``: configurations measured now and
    configurations already known (in memory or in the reference cache)."""
    configs = task.require_configs(baselines.device)
    prepared: dict = {}
    for i, cfg in enumerate(configs):
        instantiate(task, cfg, seed, i, prepared, baselines.device)
    before = baselines.timed
    with hold.lock, hold.threads():
        baselines.times(task, configs, prepared)
    if baselines.later is not None:  # (its thread would not be done before this process ends)
        baselines.later.time_now(task, configs)
    timed = baselines.timed - before
    return timed, len(configs) - timed
