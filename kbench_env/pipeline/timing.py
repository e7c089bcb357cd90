"""The timing stage: the candidate timed in its worker, configuration by configuration, under the reference's
conditions (the same input sets, every timed call on fresh inputs), with the outputs of timed calls checked on
this side (timed_checks); the speedups over the reference's times (baseline). Also the wall-clock re-timing from
this process that plausibility and baseline use."""

from __future__ import annotations

import time

from kbench_env.device import Device
from kbench_env.pipeline import blocks, integrity
from kbench_env.pipeline import timed_checks
from kbench_env.pipeline.compare import compare_outputs
from kbench_env.pipeline.reports import flag, note_reports
from kbench_env.pipeline.result import EvalResult, add_phase, config_label, phase
from kbench_env.protocol import messages as msg
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.sandbox.worker_process import Worker
from kbench_env.tasks.task import DTYPES, Config, Task, geomean


def time_stage(ev, task: Task, configs: list[Config], prepared: dict, seed: int, worker: Worker,
               result: EvalResult) -> None:
    """Time the reference (cached by ``ev.baselines``), then the candidate, into ``result``."""
    with phase(result, "reference_timing"):
        ref_times = ev.baselines.times(task, configs, prepared, seed)
    with phase(result, "timing"):
        time_candidate(ev, task, configs, prepared, seed, worker, result, ref_times)


def time_candidate(ev, task: Task, configs: list[Config], prepared: dict, seed: int, worker: Worker,
                   result: EvalResult, ref_times: dict) -> None:
    for i, cfg in enumerate(configs):
        cr = result.configs[i]
        if Device.parse(ev.device).is_cpu:
            if not _time_on_trusted_clock(ev, task, cfg, cr, prepared, worker, result):
                return
            _speedup(cr, ref_times[cfg.name])
            continue
        checks = timed_checks.for_config(task, cfg, i, seed, prepared, ev.device, ev.input_sets, ev.noise)
        made = checks.timed_inputs
        worker.send({"type": msg.TIME, "config": cfg.name, "backward": task.backward, "params": ev.timing,
                     "seed": made.seed, "noise": ev.noise, "base_seed": made.base_seed, "sets": ev.input_sets,
                     "fingerprint_seed": checks.fingerprint.seed})
        header, payload = worker.recv(ev.limits.time_timeout, f"timing of configuration {cfg.name!r}")
        if note_reports(result, header, cfg.name):
            return
        if header["type"] == msg.ERROR:
            result.error = f"configuration {config_label(cfg, cr)} failed while being timed: {header['message']}"
            result.error_stage = "timing"
            result.correct = False
            return
        with phase(result, "timed_output_checks"):
            rows = payload.get("fingerprints") if isinstance(payload, dict) else None
            reported = integrity.Reported(rows, header.get("fingerprint_counts"))
            wrong = checks.first_wrong(reported, ev._rng, ev.check_calls)
        if wrong is not None:
            flag(result, f"timed_output_wrong: the output of timed call {wrong} on configuration "
                         f"{cfg.name!r} does not match the reference for its inputs, although the "
                         f"correctness run passed (cached, stale or deferred results): {checks.why}")
            result.correct = False
            return
        cr.candidate_ms, cr.candidate_spread_ms = header["median_ms"], header["iqr_ms"]
        _speedup(cr, ref_times[cfg.name])
    _summarise(result)


def _speedup(cr, rt: dict) -> None:
    cr.reference_ms, cr.reference_spread_ms = rt["median_ms"], rt["iqr_ms"]
    cr.compile_ms = rt.get("compile_ms")
    cr.speedup = cr.reference_ms / max(cr.candidate_ms, 1e-9)


def _time_on_trusted_clock(ev, task: Task, cfg: Config, cr, prepared: dict, worker: Worker,
                           result: EvalResult) -> bool:
    """Time one configuration by this side's clock with its outputs read and checked here (blocks.py); False when
    the candidate failed or a checked output was wrong (``result`` says why)."""
    mod, init_inputs, init_seed, inputs = prepared[cfg.name]
    reference = task.reference_runner(mod, init_inputs, cfg, init_seed, ev.device)
    dtype = DTYPES[cfg.dtype]

    def check(out, call_inputs):
        mismatch, _ = compare_outputs(out, reference(call_inputs), dtype, task.tolerance)
        return None if mismatch is None else mismatch.message

    try:
        bt = blocks.time_blocks(worker, cfg.name, inputs, ev.noise, ev.timing, ev.limits.time_timeout,
                                check=check, check_calls=ev.check_calls)
    except blocks.TimedCallFailed as exc:
        result.error = f"configuration {config_label(cfg, cr)} failed while being timed: {exc}"
        result.error_stage, result.correct = "timing", False
        return False
    add_phase(result, "timed_output_checks", bt.check_seconds)
    if bt.wrong is not None:
        flag(result, f"timed_output_wrong: the output of timed call {bt.wrong_call} on configuration {cfg.name!r} "
                     f"does not match the reference for its inputs, although the correctness run passed (cached, "
                     f"stale or deferred results): {bt.wrong}")
        result.correct = False
        return False
    cr.candidate_ms, cr.candidate_spread_ms = bt.timing.median_ms, bt.timing.iqr_ms
    return True


def _summarise(result: EvalResult) -> None:
    """The evaluation's times and speedups: geometric means over its configurations."""
    result.candidate_ms = geomean([c.candidate_ms for c in result.configs])
    result.reference_ms = geomean([c.reference_ms for c in result.configs])
    result.speedup = geomean([c.speedup for c in result.configs])
    if all(c.compile_ms for c in result.configs):
        result.speedup_compile = geomean([c.compile_ms / max(c.candidate_ms, 1e-9) for c in result.configs])
    result.stage = "timed"


def wallclock(worker: Worker, config: str, inputs: list, seed: int, noise: float, timeout: float,
              calls: int = 20) -> float:
    """Per-call time measured by this process's clock around ``calls`` back-to-back calls in the worker."""
    worker.send({"type": msg.WALLCLOCK, "config": config, "calls": calls, "seed": seed, "noise": noise},
                {"inputs": inputs})
    header, _ = worker.recv(timeout, "re-timing (inputs)")
    if header["type"] == msg.ERROR:
        raise WorkerError(f"re-timing failed: {header['message']}")
    t0 = time.perf_counter()
    worker.send({"type": msg.GO})
    header, _ = worker.recv(timeout, "re-timing")
    return (time.perf_counter() - t0) * 1e3 / calls
