"""EvalResult: the plain, JSON-serialisable record of one evaluation, and its feedback text.

Field names are stable: agents, logs and reports depend on them. This module only holds and renders data
(and times the evaluation's phases into it); it computes nothing about candidates.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field

from kbench_env.pipeline.feedback import full_feedback

#: Stages in order; ``EvalResult.stage`` is the last one passed ("none": rejected by the screen).
STAGES = ("none", "screened", "built", "ran", "correct", "timed")


@dataclass
class ConfigResult:
    """Correctness and timing of the candidate on one input configuration."""

    name: str
    held_out: bool
    dtype: str
    inputs: list = field(default_factory=list)  # shapes, e.g. ["float32[16, 4096]"]
    correct: bool | None = None
    error: str | None = None  # mismatch or runtime message
    norm_err: float | None = None
    max_err: float | None = None
    candidate_ms: float | None = None
    candidate_spread_ms: float | None = None  # inter-quartile range
    reference_ms: float | None = None
    reference_spread_ms: float | None = None
    compile_ms: float | None = None  # torch.compile baseline, when measured
    speedup: float | None = None
    # On the CPU (paired timing, pipeline/paired.py): the speedup's confidence interval [lo, hi], taken at the
    # confidence that makes the evaluation's ``speedup_ci`` hold at 95 % (pair_stats.py), and the pairs of blocks
    # it rests on; None on a GPU
    speedup_ci: list | None = None
    timed_pairs: int | None = None
    # share of forward's device time (CPU time on the CPU) in the candidate's own kernels, from the audited
    # correctness call (coverage.py); None where not measured
    kernel_coverage: float | None = None
    # calls in each of the candidate's timed blocks: every call's output is kept until its block is checked, so a
    # block writes this many outputs (the roofline floor's working set: plausibility.py)
    timed_block_calls: int | None = None


@dataclass
class EvalResult:
    """Outcome of evaluating one candidate source on one task."""

    task: str
    backend: str
    device: str
    source_hash: str = ""
    stage: str = "none"
    compiled: bool = False
    correct: bool = False
    error: str | None = None
    error_stage: str | None = None  # "screen", "build", "load", "run", "correctness", "timing", "integrity"
    configs: list = field(default_factory=list)  # list[ConfigResult]
    held_out_count: int | None = None  # held-out configurations of the task on this device (some may not have run)
    candidate_ms: float | None = None  # geometric mean over timed configurations
    reference_ms: float | None = None
    speedup: float | None = None  # geometric mean of per-configuration speedups vs eager
    # 95 % confidence interval [lo, hi] of ``speedup`` (the CPU's paired timing, pipeline/pair_stats.py; None on a
    # GPU): the reward pays "faster" only when lo > 1 (pipeline/reward.py)
    speedup_ci: list | None = None
    speedup_compile: float | None = None  # vs torch.compile, when measured
    baseline: str = "eager"
    rules: str = "strict"  # what forward may run besides the candidate's own kernels (rules.py)
    format: str = "kernelbench"  # the action format the candidate was held to (formats.py)
    kernel_coverage: float | None = None  # mean of the configurations' kernel_coverage
    integrity_flags: list = field(default_factory=list)  # "kind: detail" (protocol/integrity_flags.py)
    reward: float = 0.0
    build_seconds: float | None = None
    cached_build: bool | None = None
    eval_seconds: float | None = None
    worker_seconds: float | None = None  # time the worker spent running and timing (build excluded)
    # Where the evaluation's wall time went: build (worker start to loaded), device_wait (for the device lock),
    # check (correctness runs; of it, on the trusted side: check_inputs made, check_send (inputs packed and sent),
    # check_recv (the worker's runs and their outputs read), reference_outputs, check_judge (the comparison)),
    # reference_prepare and timing_prepare (on a GPU under shared checks: the reference run, unless its worker,
    # started beside the build, ran it ahead there; the candidate's timed blocks set up; beside other checks),
    # reference_wait (for the reference's run ahead to end, nothing held: its compiles not run twice), reference_timing
    # (its own worker, with the device calibration on first use), timing (candidate, with the timed_output_checks,
    # timing_set_up, the timed blocks' set-up where not made ahead, and timing_again, the timings after the first: on a
    # GPU a bound paid or a short run, on the CPU a pairing whose reference ran disturbed), plausibility; worker_audit:
    # of check, the worker's time starting, stopping and reading its forward audit's profiler; worker_warmup: of build,
    # the worker's warm-up before the candidate loads (its message framing; on a GPU, the start of CUDA and of the
    # audit's profiler; worker_cuda_start: of it, CUDA's context and first kernel); builder: of build, the builder's
    # own time on the builds made for it (not their wait for a build slot; none where every build was found cached);
    # device_memory_wait: an evaluation that found its GPU's memory exhausted outside the candidate (the trusted side,
    # a reference's run) gave back what it could and waited for memory before running once more (this result is the
    # second run's; pipeline/attempts.py).
    phase_seconds: dict = field(default_factory=dict)
    log_tail: str | None = None  # the worker's own output (compiler, prints), trimmed

    def to_dict(self) -> dict:
        return json_safe(asdict(self))

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @staticmethod
    def from_dict(d: dict) -> "EvalResult":
        d = dict(d)
        d["configs"] = [ConfigResult(**c) for c in d.get("configs", [])]
        known = EvalResult.__dataclass_fields__
        return EvalResult(**{k: v for k, v in d.items() if k in known})

    # ------------------------------------------------------------------ feedback text
    def feedback(self) -> str:
        """The researcher's feedback text: the error, the first mismatch, or the timing table, every
        configuration shown as it is (``feedback.policy_feedback`` is what a policy reads)."""
        return full_feedback(self)


def hash_source(source: str) -> str:
    """A candidate source's ``EvalResult.source_hash``: the first 16 hex digits of its sha256."""
    return hashlib.sha256(source.encode("utf-8", "replace")).hexdigest()[:16]


def json_safe(o):
    """``o`` made JSON-safe: non-finite floats, in it or in its dicts, lists and tuples, become the strings "inf",
    "-inf" and "nan"."""
    if isinstance(o, dict):
        return {k: json_safe(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [json_safe(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return "inf" if o > 0 else ("-inf" if o < 0 else "nan")
    return o


@contextlib.contextmanager
def phase(result: EvalResult, name: str):
    """Add the wall time of the block to ``result.phase_seconds[name]``."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        add_phase(result, name, time.perf_counter() - t0)


def add_phase(result: EvalResult, name: str, seconds: float) -> None:
    result.phase_seconds[name] = round(result.phase_seconds.get(name, 0.0) + seconds, 4)


def config_label(cfg, cr: ConfigResult) -> str:
    """How messages name a configuration (a tasks.Config): its name, held out or not, and its inputs."""
    return f"{cfg.name!r}" + (" (held out)" if cfg.held_out else "") + f" with inputs {', '.join(cr.inputs)}"


def trim_log(text: str, max_lines: int = 30) -> str | None:
    """The last lines of a worker's log, for ``EvalResult.log_tail``."""
    if not text:
        return None
    lines = text.strip().splitlines()
    return "\n".join(lines[-max_lines:])
