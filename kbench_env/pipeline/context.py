"""What the stages of one evaluation share: ``StageContext``, passed from stage to stage (check, timing,
plausibility) by the stage order in evaluator.py, and ``Prepared``, a configuration's reference side made by the
check and used by the stages after it. No stage takes the Evaluator: what a stage reads of it is here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from kbench_env.pipeline.seeds import stream_seeds

if TYPE_CHECKING:
    from kbench_env.config import EvaluatorConfig
    from kbench_env.pipeline.baseline import Baselines
    from kbench_env.pipeline.device_hold import DeviceHold
    from kbench_env.pipeline.result import EvalResult
    from kbench_env.sandbox.confine.policy import Limits
    from kbench_env.sandbox.worker_process import Worker
    from kbench_env.tasks.task import Config, Task


class Prepared(NamedTuple):
    """One configuration's reference side, made before its correctness run (check.instantiate): the reference
    module, its init inputs, the seed its parameters are drawn with, and the inputs of the run."""

    module: Any
    init_inputs: list
    init_seed: int
    inputs: list

    @classmethod
    def made(cls, task: Task, cfg: Config, seed: int, i: int, device: str) -> Prepared:
        """Configuration ``cfg``, the ``i``-th of its task's, made from ``seed`` (its streams: seeds.stream_seeds)."""
        in_seed, init_seed = stream_seeds(seed, i)
        mod, init_inputs, inputs = task.instantiate(cfg, in_seed, device)
        return cls(mod, init_inputs, init_seed, inputs)


@dataclass
class StageContext:
    """One evaluation as its stages see it.

    Of the evaluator: ``config``, its options as decided for the device (Evaluator.config); ``timing_params``,
    the timing's parameters, which the device calibration completes (baseline.Baselines shares them);
    ``baselines``, the reference side; ``hold``, how this evaluation holds the device (device_hold.DeviceHold).
    Of the evaluation: the task and its configurations on this device, the seed, the candidate's worker, the
    result the stages fill in, ``prepared`` (configuration name -> Prepared), which the check fills in, and
    ``ahead``, the GPU timing's set-ups made before its exclusive hold (timing.set_up_ahead).
    """

    config: EvaluatorConfig
    timing_params: dict
    baselines: Baselines
    hold: DeviceHold
    task: Task
    configs: list[Config]
    seed: int
    worker: Worker
    result: EvalResult
    prepared: dict[str, Prepared] = field(default_factory=dict)
    ahead: dict[str, Any] = field(default_factory=dict)  # configuration name -> its timed blocks set up ahead

    @property
    def device(self) -> str:
        return self.config.device

    @property
    def limits(self) -> Limits:
        return self.config.resources.limits
