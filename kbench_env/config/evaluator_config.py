"""Every option of an Evaluator in one frozen record: ``EvaluatorConfig``, its options grouped as the stages use
them (``timing``, ``integrity``, ``resources``).

An option that a ``KBENCH_*`` variable sets (environ.py) takes the variable's value when the config is made
without it. ``None`` left in an option means "the device decides" (on for GPUs, off on the CPU), and the Evaluator
decides it: ``Evaluator.config`` is the config with every option decided.

``EvaluatorConfig.from_options(device="cpu", spare_worker=False)`` makes one from the flat keyword options that
``Evaluator(...)`` and the executors take (``OPTIONS`` says where each lives); ``config.replace(...)`` changes
some. This module imports nothing of kbench but environ.py: every package may import it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbench_env.config import environ


@dataclass(frozen=True)
class TimingConfig:
    """How candidates and the reference are timed.

    time_candidates: False skips timing (correctness only; speedup stays None).
    baseline: "eager" or "compile": the reference the reward's speedup is measured against.
    params (the option ``timing``): the timing's stopping rule: warmup, min_reps, max_reps, min_seconds
        (blocks.py, gpu_blocks.py); on the CPU, paired: ci_width, pair_seconds, block_seconds (paired.py).
    noise: relative size of the per-call perturbation of the timed inputs.
    check_calls: timed calls per block whose outputs the trusted side reads and checks (chosen after the block ran).
    compile_baseline: also time the reference under torch.compile; None: on for GPUs, off on the CPU
        (default: ``KBENCH_COMPILE_BASELINE``). Always on with baseline "compile".
    compile_later: with the compile baseline and baseline "eager", time the compiled reference off the candidates'
        path, when the device has nothing of theirs (pipeline/compile_later.py): a candidate's ``speedup_compile``
        is None until its task's is known. None: on for GPUs that share checks, off on the CPU (default:
        ``KBENCH_COMPILE_LATER``). Never with baseline "compile", whose reward needs it.
    reference_cache: reference timings kept on disk across processes and runs: True, False or a folder; None: on
        for GPUs, off on the CPU (default: ``KBENCH_REFERENCE_CACHE``; pipeline/reference_cache.resolve_root says
        why).
    """

    time_candidates: bool = True
    baseline: str = "eager"
    params: dict = field(default_factory=dict)
    noise: float = 1e-2
    check_calls: int = 4
    compile_baseline: bool | None = field(default_factory=lambda: environ.get("KBENCH_COMPILE_BASELINE"))
    compile_later: bool | None = field(default_factory=lambda: environ.get("KBENCH_COMPILE_LATER"))
    reference_cache: bool | str | Path | None = field(default_factory=lambda: environ.get("KBENCH_REFERENCE_CACHE"))


@dataclass(frozen=True)
class IntegrityConfig:
    """What a candidate is held to besides correctness.

    rules: "strict" or "kernelbench": what forward may run besides the candidate's own kernels (pipeline/rules.py).
    reverify_above: speedups above this are re-timed by an independent method (wall clock from the trusted side).
    roofline: flag times below the device's measured bandwidth / FLOP-rate floor.
    """

    rules: str = "strict"
    reverify_above: float = 10.0
    roofline: bool = True


@dataclass(frozen=True)
class ResourcesConfig:
    """What an Evaluator runs on and keeps.

    limits: sandbox limits and per-stage timeouts (sandbox.confine.policy.Limits; None: ``Limits()``).
    cache_dir: where builds are kept, shared by all workers (None: ``$KBENCH_CACHE`` or ~/.cache/kbench).
    build_workers: candidates in flight at once in ``evaluate_many`` (None: the number of CPU cores).
    spare_worker: keep started, confined, idle workers ready for the next candidates, one per evaluation in
        flight or at the recent peak of those in flight, so that a batch after a quiet gap finds spares
        (sandbox.SpareWorkers; on a GPU with CUDA started), at most what the host's cores and memory allow
        (``KBENCH_SPARE_WORKERS`` sets that), or at most this number when it is one; off with False (default:
        ``KBENCH_SPARE_WORKER``, on unless 0).
    shared_checks: candidates' correctness checks share the device (up to shared_device_lock.SHARED_CAP at once
        per Evaluator) instead of holding it one at a time; timing, reference timing and plausibility still have
        it to themselves, excluding every other holder in this and other processes. It trades device memory for
        less time waiting on the device. None: on for GPUs, off on the CPU (default: ``KBENCH_SHARED_CHECKS``;
        pipeline/device_hold.shared_checks_setting says why).
    remote_builds: "ray" or "ray:<address>": builds as Ray tasks on a cluster's CPU nodes (builder/ray_builds.py).
    """

    limits: Any = None  # a sandbox.confine.policy.Limits (not imported: config is below the sandbox)
    cache_dir: str | Path | None = None
    build_workers: int | None = None
    spare_worker: bool | int = field(default_factory=lambda: environ.get("KBENCH_SPARE_WORKER"))
    shared_checks: bool | None = field(default_factory=lambda: environ.get("KBENCH_SHARED_CHECKS"))
    remote_builds: str | None = None


@dataclass(frozen=True)
class EvaluatorConfig:
    """Every option of an Evaluator (module doc).

    device: "auto" (cuda if available, else cpu), "cpu", "cuda", "cuda:1".
    backend: kernel language; None: "cpu" on the CPU and "cuda" on a GPU (fixed by format "fast" and "triton").
    format: the action format candidates are held to: "kernelbench", "fast" or "triton" (pipeline/formats.py).
    reward: a preset name of pipeline/reward.PRESETS or a callable over the EvalResult.
    timing, integrity, resources: the option groups above.
    """

    device: str = "auto"
    backend: str | None = None
    format: str = "kernelbench"
    reward: str | Callable[..., float] = "tiered"
    timing: TimingConfig = field(default_factory=TimingConfig)
    integrity: IntegrityConfig = field(default_factory=IntegrityConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)

    @classmethod
    def from_options(cls, **options) -> EvaluatorConfig:
        """A config from the flat keyword options (``OPTIONS``), the environment's defaults for the others."""
        return cls().replace(**options)

    def replace(self, **options) -> EvaluatorConfig:
        """This config with the flat keyword ``options`` (``OPTIONS``) changed; one given as None is left as it is
        (the default, or the environment's). An unknown name is a TypeError."""
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError(f"unknown Evaluator option(s): {', '.join(unknown)} (the options: {', '.join(OPTIONS)}; "
                            f"kbench_env.config.evaluator_config)")
        top: dict[str, Any] = {}
        groups: dict[str, dict[str, Any]] = {}
        for name, value in options.items():
            if value is not None:
                group, name_there = OPTIONS[name]
                (top if group is None else groups.setdefault(group, {}))[name_there] = value
        for group, changes in groups.items():
            top[group] = dataclasses.replace(getattr(self, group), **changes)
        return dataclasses.replace(self, **top)

    def options(self) -> dict[str, Any]:
        """The flat keyword options of this config (``from_options(**config.options())`` is the same config)."""
        return {name: getattr(self if group is None else getattr(self, group), name_there)
                for name, (group, name_there) in OPTIONS.items()}


def _options() -> dict[str, tuple[str | None, str]]:
    """Each flat option: (its group, None for the top level; its name there). Only ``timing`` is named otherwise
    in its group (``timing.params``: the group is ``timing``)."""
    out: dict[str, tuple[str | None, str]] = {f.name: (None, f.name) for f in dataclasses.fields(EvaluatorConfig)
                                              if f.name not in _GROUPS}
    for group, cls in _GROUPS.items():
        out.update({("timing" if f.name == "params" else f.name): (group, f.name) for f in dataclasses.fields(cls)})
    return out


_GROUPS = {"timing": TimingConfig, "integrity": IntegrityConfig, "resources": ResourcesConfig}
#: The Evaluator's flat keyword options (``Evaluator(device=..., spare_worker=...)``) and where each lives.
OPTIONS = _options()

__all__ = ["EvaluatorConfig", "IntegrityConfig", "OPTIONS", "ResourcesConfig", "TimingConfig"]
