"""The timing stage: the candidate timed configuration by configuration under the reference's conditions, every
timed call on fresh inputs written by this side, the outputs of calls chosen after each block read and checked
here. On the CPU the reference and the candidate are timed together, in alternating blocks (paired.py, on
blocks.py's exchange), and each speedup comes with its confidence interval (pair_stats.py); on a GPU the candidate
(gpu_blocks.py) is timed against the reference's times (baseline). Also the wall-clock re-timing from this process
that plausibility and baseline use."""

from __future__ import annotations

import contextlib
import statistics
import time

import torch

from kbench_env.config import environ
from kbench_env.machine.device import Device
from kbench_env.pipeline import blocks, coverage, gpu_blocks, pair_stats, paired
from kbench_env.pipeline.nearby import check_call
from kbench_env.measure.ownership import trusted_prefixes
from kbench_env.pipeline.context import StageContext
from kbench_env.pipeline.quiet import LIVE
from kbench_env.pipeline.reference_pace import paired_again_if_disturbed
from kbench_env.pipeline.reports import flag
from kbench_env.pipeline.result import EvalResult, add_phase, config_label, phase
from kbench_env.protocol import messages as msg
from kbench_env.protocol.integrity_flags import make
from kbench_env.sandbox import samples
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.sandbox.placement import Placement, timing_cores
from kbench_env.sandbox.worker_process import Worker
from kbench_env.tasks.input_draws import input_draws
from kbench_env.tasks.task import DTYPES, Config, geomean


#: CPU time between two samples of the worker's threads in the sampled blocks (blocks._sample): ~500 samples a
#: thread in a 50 ms block, within a sample buffer (sandbox/samples.py).
SAMPLE_PERIOD_NS = 100_000
#: Paired blocks run at a raised priority where this process may set it (sandbox/placement.py);
#: KBENCH_TIMING_BOOST=0 turns it off.
PRIORITY_BOOST = environ.get("KBENCH_TIMING_BOOST")
#: The share of the device's memory that timed blocks set up ahead of their timing may take together
#: (set_up_ahead): split among the candidates that may hold set-ups at once (twice the shared checks' cap), each
#: block counted as twice its inputs (the reference's block size times a call's inputs; its outputs about as many).
AHEAD_SHARE = 0.25


def is_paired(ctx: StageContext) -> bool:
    """Whether the candidate is timed paired with its reference (the CPU without a reference cache: time_stage):
    then the reference's worker is its own, started by the pairing, and ``ctx.baselines.prepare`` has no use."""
    return Device.parse(ctx.device).is_cpu and ctx.baselines.disk_root is None


def time_stage(ctx: StageContext) -> list:
    """Time the candidate against the reference into ``result``: on the CPU paired, reference and candidate in
    alternating blocks of one session (paired.py), every other worker of this process stopped meanwhile (quiet.py);
    on a GPU the reference first (cached by ``ctx.baselines``), then the candidate. A CPU evaluator given a
    reference cache (opted into where the machine is known to be quiet: reference_cache.resolve_root) uses its
    stored reference timings as a GPU does, unpaired and without an interval: re-timing the reference beside each
    candidate is what pairing is, and what a cache is there to avoid. Returns the timings whose read outputs are
    still to be judged (``judge_deferred``: under shared checks, out of the exclusive hold)."""
    if is_paired(ctx):
        time_paired_stage(ctx)
        return []
    with phase(ctx.result, "reference_timing"):
        ref_times = ctx.baselines.times(ctx.task, ctx.configs, ctx.prepared)
    deferred: list = []
    with phase(ctx.result, "timing"):
        time_candidate(ctx, ref_times, deferred)
    return deferred


def set_up_ahead(ctx: StageContext) -> None:
    """On a GPU under shared checks, with the reference's timings known (cached): each configuration's timed blocks
    set up in the candidate's worker ahead of the timing (gpu_blocks.set_up_ahead: made, captured, warmed up and
    checked), under the checks' shared hold, so that the timing's exclusive hold holds only the timed blocks. In
    configuration order while the blocks' bytes stay within the candidate's share of AHEAD_SHARE of the device's
    memory (the worker keeps them all until its timing; one that would pass it is left to the timing, and the next
    ones still tried: a large configuration does not keep a small one after it out), stepping aside for a waiting
    timing between two. A set-up that fails is left to the timing, which does it again and reports it."""
    if Device.parse(ctx.device).is_cpu or not ctx.hold.shared:
        return
    ref_times = ctx.baselines.known(ctx.task, ctx.configs)
    if ref_times is None:
        return
    t, held = ctx.config.timing, 0
    budget = ahead_budget(ctx.device, ctx.hold.lock)
    for cfg in ctx.configs:
        ref, inputs = ref_times[cfg.name].get("gpu"), ctx.prepared[cfg.name].inputs
        if not ref:
            return
        size = ahead_bytes(int(ref["block"]), inputs)
        if held + size > budget:
            continue
        held += size
        if ctx.hold.timing_waits():
            ctx.hold.step_aside(ctx.result)
        try:
            ahead = ctx.ahead[cfg.name] = gpu_blocks.set_up_ahead(
                ctx.worker, cfg.name, inputs, t.noise, ctx.timing_params, ctx.limits.time_timeout, ctx.device,
                _checker(ctx, cfg), t.check_calls, ref, ctx.task.backward, input_draws(ctx.task, cfg))
        except Exception:  # noqa: BLE001 - left to the timing, which reports it
            return
        for step, seconds in ahead.spent.items():  # where the set-ups' time goes (phases ahead_set_up, ...)
            add_phase(ctx.result, f"ahead_{step}", seconds)


def ahead_budget(device: str, lock) -> float:
    """The bytes one candidate's set-ups ahead may take: its share (of twice the shared checks' cap of ``lock``) of
    AHEAD_SHARE of the device's memory."""
    return AHEAD_SHARE * torch.cuda.get_device_properties(torch.device(device)).total_memory / (
        2 * max(1, int(getattr(lock, "max_shared", 1))))


def ahead_bytes(block: int, inputs: list) -> int:
    """What a configuration's block set up ahead is counted as: twice its inputs (its outputs about as many)."""
    return 2 * block * sum(x.numel() * x.element_size() for x in inputs if hasattr(x, "numel"))


def close_ahead(ctx: StageContext) -> None:
    """Unmap the set-ups made ahead that no timing used (an earlier configuration failed, or the worker did)."""
    while ctx.ahead:
        _, ahead = ctx.ahead.popitem()
        try:
            ahead.close()
        except Exception:  # noqa: BLE001 - a worker that died took its memory with it
            pass


def time_candidate(ctx: StageContext, ref_times: dict, deferred: list | None = None) -> None:
    result = ctx.result
    for cfg, cr in zip(ctx.configs, result.configs):
        if not _time_on_trusted_clock(ctx, cfg, cr, ref_times[cfg.name], deferred):
            return
        _speedup(cr, ref_times[cfg.name])
    _summarise(result)


def judge_deferred(deferred: list, result: EvalResult) -> None:
    """Judge the timed outputs read during the timing and kept (gpu_blocks.py ``defer``); a wrong one fails the
    candidate as it would have during the timing: flagged, not correct, no speedup."""
    t0 = time.perf_counter()
    try:
        for cfg, bt in deferred:
            wrong = bt.deferred.judge()
            if wrong is not None:
                _wrong(result, cfg, *wrong)
                result.stage, result.speedup, result.speedup_compile = "correct", None, None
                return
    finally:
        add_phase(result, "deferred_output_checks", time.perf_counter() - t0)


def time_paired_stage(ctx: StageContext) -> None:
    """The CPU's timing: per configuration, reference and candidate interleaved (paired.time_paired) in a
    reference worker of this evaluation's own; each configuration's interval at the confidence that makes the
    evaluation's hold at pair_stats.CONFIDENCE. With ``compile_baseline`` the torch.compile reference is timed
    apart (unpaired, as on a GPU) for ``speedup_compile``."""
    base, task, configs, result = ctx.baselines, ctx.task, ctx.configs, ctx.result
    confidence = pair_stats.config_confidence(len(configs))
    with contextlib.ExitStack() as stack:
        with phase(result, "reference_timing"):
            ref_worker = stack.enter_context(base.session(task, configs))
            compile_ms = base.compile_times(task, configs, ctx.prepared) if ctx.config.timing.compile_baseline else {}
        stack.enter_context(LIVE.others_stopped([ctx.worker, ref_worker]))
        for cfg, cr in zip(configs, result.configs):
            with phase(result, "reference_timing"):
                ref_name = base.prepare_paired(ref_worker, task, cfg, ctx.prepared)
            with phase(result, "timing"):
                pt = _time_one_paired(ctx, cfg, cr, ref_worker, ref_name, confidence)
            if pt is None:
                return
            cr.candidate_ms, cr.candidate_spread_ms = pt.candidate.median_ms, pt.candidate.iqr_ms
            cr.reference_ms, cr.reference_spread_ms = pt.reference.median_ms, pt.reference.iqr_ms
            cr.speedup, cr.speedup_ci, cr.timed_pairs = pt.speedup, list(pt.ci), pt.pairs
            cr.compile_ms = (compile_ms.get(cfg.name) or {}).get("compile_ms")
    _summarise(result)
    result.speedup_ci = pair_stats.combined([c.speedup_ci for c in result.configs])


def _time_one_paired(ctx: StageContext, cfg: Config, cr, ref_worker: Worker, ref_name: str, confidence: float):
    """One configuration's paired timing, or None when the candidate failed or a checked output was wrong
    (``ctx.result`` says why)."""
    result, t, limits = ctx.result, ctx.config.timing, ctx.limits
    own, sampler = _cpu_sampler(ctx)

    def once():
        return paired.time_paired(ctx.worker, ref_worker, cfg.name, ref_name, ctx.prepared[cfg.name].inputs, t.noise,
                                  ctx.timing_params, limits.time_timeout, _checker(ctx, cfg), t.check_calls,
                                  confidence, Placement(timing_cores(limits.threads), boost=PRIORITY_BOOST),
                                  draws=input_draws(ctx.task, cfg), sampler=sampler)

    try:  # timed again once where the reference ran disturbed (reference_pace.py)
        pt, again = paired_again_if_disturbed(once, ctx.baselines.pace, ctx.baselines.key(ctx.task, cfg))
    except blocks.TimedCallFailed as exc:
        _failed(result, cfg, cr, exc)
        return None
    finally:
        if sampler is not None:
            sampler.close()
    if pt.samples:
        _bound_coverage(cr, result, coverage.sampled_share(pt.samples, own, trusted_prefixes()))
    add_phase(result, "timed_output_checks", pt.check_seconds)
    add_phase(result, "timing_again", again)
    if pt.wrong is not None:
        _wrong(result, cfg, pt.wrong_call, pt.wrong)
        return None
    return pt


def _speedup(cr, rt: dict) -> None:
    cr.reference_ms, cr.reference_spread_ms = rt["median_ms"], rt["iqr_ms"]
    cr.compile_ms = rt.get("compile_ms")
    cr.speedup = cr.reference_ms / max(cr.candidate_ms, 1e-9)


def _checker(ctx: StageContext, cfg: Config):
    """``check(out, call_inputs)``: why a timed call's output is wrong for its inputs, or None."""
    task, p = ctx.task, ctx.prepared[cfg.name]
    reference = task.reference_runner(p.module, p.init_inputs, cfg, p.init_seed, ctx.device)
    dtype = DTYPES[cfg.dtype]

    def check(out, call_inputs):
        return check_call(out, call_inputs, reference, dtype, task.tolerance)

    return check


def _failed(result: EvalResult, cfg: Config, cr, exc: Exception) -> None:
    result.error = f"configuration {config_label(cfg, cr)} failed while being timed: {exc}"
    result.error_stage, result.correct = "timing", False


def _wrong(result: EvalResult, cfg: Config, call: int, why: str) -> None:
    flag(result, make("timed_output_wrong", f"the output of timed call {call} on configuration {cfg.name!r} does "
                                            f"not match the reference for its inputs, although the correctness run "
                                            f"passed (cached, stale or deferred results): {why}"))
    result.correct = False


def _cpu_sampler(ctx: StageContext):
    """``(own libraries, a Sampler of the worker)`` on the CPU where the candidate brought libraries of its own
    (their samples are its own: the kernel coverage's bound, coverage.sampled_share), else ``(own, None)``."""
    own = [path for path, _ in ctx.worker.linked()]
    return own, (samples.Sampler(ctx.worker.proc.pid, SAMPLE_PERIOD_NS) if own and Device.parse(ctx.device).is_cpu
                 else None)


def _time_on_trusted_clock(ctx: StageContext, cfg: Config, cr, ref: dict, deferred: list | None = None) -> bool:
    """Time one configuration with its outputs read and checked here: on a GPU by device events bounded by this
    side's clock (gpu_blocks.py), on the CPU (unpaired, with a reference cache) by this side's clock (blocks.py).
    False when the candidate failed or a checked output was wrong (``ctx.result`` says why)."""
    result, worker, t, inputs = ctx.result, ctx.worker, ctx.config.timing, ctx.prepared[cfg.name].inputs
    check = _checker(ctx, cfg)
    draws = input_draws(ctx.task, cfg)
    own, sampler = _cpu_sampler(ctx)
    try:
        if Device.parse(ctx.device).is_cpu:
            bt = blocks.time_blocks(worker, cfg.name, inputs, t.noise, ctx.timing_params, ctx.limits.time_timeout,
                                    check=check, check_calls=t.check_calls, draws=draws, sampler=sampler)
        else:
            bt = gpu_blocks.time_gpu_retimed(worker, cfg.name, inputs, t.noise, ctx.timing_params,
                                             ctx.limits.time_timeout, ctx.device, check=check,
                                             check_calls=t.check_calls, reference=ref.get("gpu"),
                                             backward=ctx.task.backward,
                                             defer=deferred is not None and ctx.hold.shared, draws=draws,
                                             ahead=ctx.ahead.pop(cfg.name, None))
    except blocks.TimedCallFailed as exc:
        _failed(result, cfg, cr, exc)
        return False
    finally:
        if sampler is not None:
            sampler.close()
    if getattr(bt, "samples", None):
        _bound_coverage(cr, result, coverage.sampled_share(bt.samples, own, trusted_prefixes()))
    add_phase(result, "timed_output_checks", bt.check_seconds)
    if isinstance(bt, gpu_blocks.GpuTiming):  # the timed blocks' set-up inside the exclusive hold (not made ahead)
        add_phase(result, "timing_set_up", bt.set_up_seconds)
        add_phase(result, "timing_again", bt.again_seconds)  # the timings after the first (gpu_blocks.RETIMINGS)
        for name, seconds in bt.parts.items():  # the timed blocks' parts (timing_block_stage, timing_block_worker)
            add_phase(result, f"timing_{name}", seconds)
    if bt.wrong is not None:
        _wrong(result, cfg, bt.wrong_call, bt.wrong)
        return False
    if getattr(bt, "deferred", None) is not None and len(bt.deferred):
        deferred.append((cfg, bt))
    if getattr(bt, "flagged", False):
        flag(result, make("device_time_outside_trusted_bound",
                          f"on configuration {cfg.name!r} the worker reported {bt.outside} of {len(bt.walls_ms)} "
                          f"timed blocks faster than this side's clock allows (median wall "
                          f"{_median(bt.walls_ms):.3f} ms, reported {_median(bt.device_ms):.3f} ms); the bound was "
                          f"used"))
    cr.candidate_ms, cr.candidate_spread_ms = bt.timing.median_ms, bt.timing.iqr_ms
    cr.timed_block_calls = bt.block if isinstance(bt, gpu_blocks.GpuTiming) else bt.timing.reps // max(1, bt.blocks)
    return True


def _bound_coverage(cr, result: EvalResult, share: float | None) -> None:
    """The configuration's kernel coverage bounded by the share of its timed calls' CPU samples in the candidate's
    own libraries (coverage.sampled_share), and the evaluation's mean again."""
    cr.kernel_coverage = coverage.bounded(cr.kernel_coverage, share)
    measured = [c.kernel_coverage for c in result.configs if c.kernel_coverage is not None]
    result.kernel_coverage = round(sum(measured) / len(measured), 4) if measured else None


def _median(xs: list) -> float:
    return statistics.median(xs) if xs else 0.0


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
