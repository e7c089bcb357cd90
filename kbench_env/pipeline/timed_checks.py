"""The trusted side's check of a configuration's timed calls: which calls are checked, the reference outputs for
their inputs (derived here, never received from the worker) and the verdict on the worker's fingerprints. What the
fingerprints catch, and at what rates, is ``fingerprint``'s docstring; ``check`` and ``timing`` decide when this runs."""

from __future__ import annotations

import random

from kbench_env.pipeline import integrity
from kbench_env.pipeline.compare import tolerance_for
from kbench_env.pipeline.seeds import base_seed, fingerprint_seed, timed_seed
from kbench_env.tasks.task import DTYPES, Config, Task


class TimedChecks:
    """The trusted side's check of one configuration's timed calls: the outputs of ``check_calls`` calls drawn at
    random once the worker has reported, and of the first and the last call (the first of a CUDA-graph block, the
    last timed), against the reference's for the same inputs, which this side derives itself
    (integrity.TimedInputs); the worker learns which calls were checked only from the verdict.

    Used for a GPU's timing (the CPU's timed outputs are read by the trusted side itself: blocks.py). ``prepare``
    makes the reference model and the first call's reference fingerprint once; ``first_wrong`` calls it. The input
    sets are made as checked calls need them (GPU memory)."""

    def __init__(self, task: Task, cfg: Config, prepared: tuple, device: str, timed_inputs: integrity.TimedInputs,
                 fingerprint: integrity.Fingerprint):
        self.task, self.cfg, self.prepared, self.device = task, cfg, prepared, device
        self.timed_inputs, self.fingerprint = timed_inputs, fingerprint
        self.tolerance = tolerance_for(DTYPES[cfg.dtype], task.tolerance)  # (integrity.fingerprint: the rates)
        self.why = None  # what was wrong with the call first_wrong last returned
        self._reference = None
        self._first = None  # the first call's reference fingerprint

    def prepare(self) -> None:
        if self._reference is None:
            mod, init_inputs, init_seed, _ = self.prepared
            self._reference = self.task.reference_runner(mod, init_inputs, self.cfg, init_seed, self.device)
            self._first = self._fingerprint(0)

    def _fingerprint(self, j: int) -> list:
        return self.fingerprint.of(self._reference(self.timed_inputs(j)))

    def first_wrong(self, fingerprints: list, rng: random.Random, check_calls: int) -> int | None:
        """The first checked call (in call order) whose output the reference does not confirm, or None."""
        n = len(fingerprints)
        picks = sorted(set(rng.sample(range(n), min(check_calls, n)) + [0, n - 1]))
        self.prepare()
        for j in picks:
            ref = self._first if j == 0 else self._fingerprint(j)
            self.why = integrity.fingerprint_mismatch(fingerprints[j], ref, self.tolerance)
            if self.why is not None:
                return j
        return None


def for_config(task: Task, cfg: Config, i: int, seed: int, prepared: dict, device: str, input_sets: int,
               noise: float) -> TimedChecks:
    """The checks of configuration ``i``'s timed outputs, with the seeds its timing request carries."""
    inputs = integrity.TimedInputs(prepared[cfg.name][3], base_seed(seed, i), input_sets, timed_seed(seed, i), noise)
    fingerprint = integrity.Fingerprint(fingerprint_seed(seed, i))
    return TimedChecks(task, cfg, prepared[cfg.name], device, inputs, fingerprint)
