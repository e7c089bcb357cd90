"""A GPU configuration's timing as the trusted side drives it, block by block (the GPU's counterpart of blocks.py).

The worker (worker/gpu_executor.py) captures a block of B calls as one CUDA graph on input buffers it exports to
this process (protocol/cuda_ipc.py; the exchange is gpu_run.py's), and replays it when told. Before the timed blocks
comes the set-up: the block made and captured at the reference's block size and run once, checked, not a sample (the
warm-up); a candidate far slower than its reference is set up in fewer calls a block, at once where one call's device
time shows it (``shrink_hint``), else again after its warm-up (``smaller_block``). Under
shared checks it is done ahead of the timing, outside its exclusive hold (``set_up_ahead``). Per block, this side:

1. makes the block's inputs on its own GPU memory from a secret seed drawn now (``BlockInputs``: the configuration's
   inputs plus dense noise, its integer inputs drawn afresh (tasks/input_draws.py), every call its own);
2. starts its clock, copies them into the worker's buffers, flushes the L2 cache, synchronises, and asks for the
   block (GPU_BLOCK); stops its clock at DONE. Whatever the candidate computes once the inputs exist, it computes
   inside this side's window;
3. reads the outputs of ``check_calls`` calls chosen now straight from the worker's memory and compares them with the
   reference's for those calls' inputs (at once, or, with ``defer``, after the timing, out of its exclusive hold of
   the device: deferred_checks.py); where no input of a call can vary, overwrites every output of the block with NaN
   (-1 for integers) before the next, so an output kept from an earlier call reads as garbage;
4. takes the device time the worker reports (events around the replay: precise to a microsecond, which a wall clock
   is not; the replay's whole time, nothing subtracted: backends/cuda.py says why) only down to this side's bound:
   the wall time less this side's staging of the block (the copy and the flush, timed on its own device events, no
   more than the reference's) and less the rest of the block's fixed cost outside the device work (``fixed_ms``: what
   the reference's blocks of the same size and shapes spent, the exchange and the synchronisations, measured by the
   same code) and a slack, over 1 + TOLERANCE, the median of the blocks' bounds. A timing reported under the bound by
   more than RETIME_RATIO is timed again (``time_gpu_retimed``: a burst of host load stretches the wall time of
   honest blocks, a forgery is under the bound every time), up to RETIMINGS times; if each one was, the median of
   them counts, paid its bound, and flagged (``flagged``) if each was under it by more than FLAG_RATIO.

This side counts the calls, decides when the timing stops and computes the median and spread. The worker can lie
about nothing that is believed beyond the bound: a forged device time gains at most the bound's slack and tolerance.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

from kbench_env.measure.stats import PRECISION, Timing, gpu_blocks_done, summarize
from kbench_env.pipeline.deferred_checks import DeferredChecks
from kbench_env.pipeline.gpu_run import BlockInputs, _Run  # noqa: F401 - BlockInputs: the timing's inputs, here too

#: The bound on a reported block time: (wall - staged - fixed - slack) / (1 + TOLERANCE), slack = SLACK_MS +
#: SLACK_SHARE * fixed. ``staged``: this side's copy of the block's inputs and L2 flush, on its own device events per
#: block, taken off no further than the reference's staging (1 + STAGED_SHARE): on large inputs the copy is most of the
#: wall, its variation would be read as the candidate's; capped, work slipped in beside the copy still counts.
#: ``fixed``: the rest outside the device work (the exchange, the synchronisations), the reference's median. An eager
#: block (a candidate that cannot be captured) exports its outputs inside the window: EAGER_MS_PER_CALL more slack.
#: What the bound leaves a forger: about (1 + TOLERANCE) / (1 - slack / block time), plus the fixed rest's variation.
TOLERANCE = 0.03
SLACK_MS = 0.1
SLACK_SHARE = 0.03
STAGED_SHARE = 0.03
EAGER_MS_PER_CALL = 0.02
EAGER_MAX_MS = 2.0  # (a candidate can choose to run eagerly: its extra slack is capped)
#: Reported under the bound by more than this factor: flagged (host load, builds on every core, stretches honest walls).
FLAG_RATIO = 3.0
#: Timings at most while the bound is paid by more than RETIME_RATIO (a raise of a few percent is kept as it is).
RETIMINGS = 3
RETIME_RATIO = 1.05
#: A candidate whose first block (the warm-up) lasts more than SLOW_BLOCKS times the reference's block is timed in
#: blocks of fewer calls, aimed at AIM_BLOCKS times the reference's block's wall time: a candidate 30x slower than its
#: reference would otherwise hold the device for seconds a block. Such a timing counts only if its blocks' median wall
#: time is at least SHORT_SHARE of the reference's block's (else it is timed again at the reference's size, ``short``):
#: the bound on a reported time is tighter the longer the block, and a candidate that slows its warm-up to earn
#: short blocks earns a second timing and nothing else.
SLOW_BLOCKS = 8.0
AIM_BLOCKS = 2.0
SHORT_SHARE = 0.5


@dataclass
class GpuTiming:
    """A configuration's GPU timing: ``timing`` (per-call times, one per block) or ``wrong`` (why a checked
    output did not match; ``wrong_call`` its number among the timed calls), the block size and method, this
    side's wall time and the reported device time per block (ms), how many blocks were under the bound, and
    ``fixed_ms``: the median of wall less device time (the reference's is the candidate's bound)."""

    timing: Timing | None = None
    wrong: str | None = None
    wrong_call: int | None = None
    block: int = 0
    method: str = ""
    walls_ms: list = field(default_factory=list)
    device_ms: list = field(default_factory=list)
    staged_ms: list = field(default_factory=list)  # this side's copy of each block's inputs and L2 flush (its events)
    outside: int = 0  # blocks whose own wall time bounds them above their report
    ratio: float = 0.0  # the bound over the reported time, on the medians (above 1: the bound was paid)
    flagged: bool = False
    short: bool = False  # timed in blocks shrunk for a slow candidate that ran shorter than SHORT_SHARE allows
    set_up_seconds: float = 0.0  # the blocks' set-up and warm-up in this timing (none where made ahead), all timings'
    again_seconds: float = 0.0  # the timings after the first (time_gpu_retimed): what a paid bound or a short run cost
    check_seconds: float = 0.0
    deferred: DeferredChecks | None = None  # read outputs not judged yet (deferred_checks.py)
    #: seconds of the timed blocks' parts (``_Run.take_parts``: "block_stage", "block_worker"; and "block_verdict",
    #: their read outputs checked and poisoned; "close", the blocks unmapped and released in the worker), all timings'
    parts: dict = field(default_factory=dict)
    #: the blocks' run, left set up (``time_gpu(keep=True)``) for a timing again on the same blocks; None once closed
    run: _Run | None = field(default=None, repr=False, compare=False)

    @property
    def fixed_ms(self) -> float:
        """The median of wall less device time less this side's staging of the block (timed on its own events)."""
        staged = self.staged_ms or [0.0] * len(self.walls_ms)
        return statistics.median(w - s - d for w, s, d in zip(self.walls_ms, staged, self.device_ms)) \
            if self.walls_ms else 0.0

    def reference_figures(self) -> dict:
        """What a candidate's timing of the same configuration is bounded by."""
        return {"block": self.block, "fixed_ms": self.fixed_ms, "method": self.method,
                "staged_ms": statistics.median(self.staged_ms) if self.staged_ms else 0.0,
                "wall_ms": statistics.median(self.walls_ms) if self.walls_ms else 0.0}


def _stop(times: list, total_s: float, elapsed_s: float, block: int, p: dict) -> bool:
    return gpu_blocks_done(times, total_s, elapsed_s, block, p.get("min_reps", 10), p.get("max_reps", 200),
                           float(p.get("min_seconds", 0.1)), float(p.get("max_seconds", 4.0)),
                           float(p.get("precision", PRECISION)))


def bound_ms(wall_ms: float, reference: dict, method: str, block: int, staged_ms: float = 0.0) -> float:
    """The least device time a block of wall time ``wall_ms`` may be reported to have taken (module docstring);
    ``staged_ms``: this side's staging of the block by its own events, taken off up to the reference's."""
    fixed = max(float(reference.get("fixed_ms", 0.0)), 0.0)
    staged = min(max(staged_ms, 0.0), max(float(reference.get("staged_ms", 0.0)), 0.0) * (1.0 + STAGED_SHARE))
    slack = SLACK_MS + SLACK_SHARE * fixed + (min(EAGER_MS_PER_CALL * block, EAGER_MAX_MS)
                                              if method != "cuda-graph" else 0.0)
    return max(0.0, wall_ms - staged - fixed - slack) / (1.0 + TOLERANCE)


def _bounded(out: GpuTiming, times: list, reference: dict, method: str, block: int) -> list:
    """The per-call times, raised to this side's bound where the reported ones fall under it. The bound is taken
    as the median of the blocks' bounds (one block's wall time jitters by a few tenths of a millisecond; the
    median much less), and applied by scaling every block's time, so the median becomes the bound."""
    staged = out.staged_ms or [0.0] * len(out.walls_ms)
    bounds = [bound_ms(w, reference, method, block, s) for w, s in zip(out.walls_ms, staged)]
    floor = statistics.median(bounds)
    reported = statistics.median(out.device_ms)
    out.ratio = floor / max(reported, 1e-9)
    out.outside = sum(bd > d for bd, d in zip(bounds, out.device_ms))
    out.flagged = out.ratio > FLAG_RATIO
    return [t * out.ratio for t in times] if out.ratio > 1.0 else times


@dataclass
class Ahead:
    """A configuration's timed blocks set up before its timing (``set_up_ahead``): the run, its block size and
    method, and the warm-up block's verdict (a wrong output found there: the timing fails at once)."""

    run: _Run
    block: int
    method: str
    wrong: tuple | None
    reference: dict  # the reference's figures it was set up for (a timing bounded by others sets up anew)
    #: seconds of its steps (``_warm_up``): the block set up in the worker, the warm-up block run, its outputs
    #: judged (read, the reference run for their inputs, compared), and the parts of the first two
    spent: dict = field(default_factory=dict)

    def close(self) -> None:
        """Unmap the worker's memory here, for a set-up that no timing used (the worker frees it as it ends)."""
        self.run.close(release=False)


def smaller_block(block: int, warm_wall_ms: float, reference: dict | None) -> int | None:
    """The block size for a candidate whose warm-up block of ``block`` calls took ``warm_wall_ms`` by this side's
    clock, if it is more than SLOW_BLOCKS times the reference's block (else None): about AIM_BLOCKS times the
    reference's block's wall time, at least one call."""
    ref_wall = float((reference or {}).get("wall_ms") or 0.0)
    if ref_wall <= 0.0 or block <= 1 or warm_wall_ms <= SLOW_BLOCKS * ref_wall:
        return None
    return max(1, min(block - 1, int(block * AIM_BLOCKS * ref_wall / warm_wall_ms)))


def shrink_hint(reference: dict | None) -> dict | None:
    """What lets the worker set a far slower candidate up in fewer calls a block before its first capture, not after
    a warm-up block at the reference's size (seconds of device time for a candidate hundreds of times slower):
    one call's device time over ``above_ms`` (SLOW_BLOCKS times the reference's block's wall time, a call's share)
    makes its block about ``aim_ms`` (AIM_BLOCKS of it) and no more than ``most`` calls, the largest block that
    ``smaller_block`` gives. What the worker claims buys it no block that a slow warm-up could not buy, and a block
    shrunk for a candidate that runs short is timed again at the reference's size (``short``). None where no
    smaller block is possible."""
    block, wall = int((reference or {}).get("block") or 0), float((reference or {}).get("wall_ms") or 0.0)
    if wall <= 0.0 or block <= 1:
        return None
    most = max(1, math.ceil(block * AIM_BLOCKS / SLOW_BLOCKS) - 1)  # (smaller_block's own bounds: at least one)
    return {"above_ms": SLOW_BLOCKS * wall / block, "aim_ms": AIM_BLOCKS * wall, "most": most}


def _warm_up(run: _Run, block: int, params: dict, spent: dict | None = None,
             shrink: dict | None = None) -> tuple[int, str, float, tuple | None]:
    """Set the block up in the worker and run it once, checked, not a sample: (size, method, wall ms, wrong). Each
    step's seconds are added to ``spent`` ("set_up", "block", "verdict"), and their parts (the run's
    ``take_parts``: "set_up_worker", the worker's round trip, of it the worker's own steps "set_up_<step>" by its
    account; "set_up_map", this side's mapping of the block's memory; "block_stage", the inputs drawn and copied
    and the L2 flushed; "block_worker", the worker's run of the block and its reply)."""
    spent = {} if spent is None else spent
    run.take_parts()  # (only this warm-up's)
    t0 = time.perf_counter()
    b, method = run.set_up(block, params, shrink)
    t1 = time.perf_counter()
    wall, _, _, staged, _ = run.block(b)
    t2 = time.perf_counter()
    wrong = run.verdict(staged, b, 0) or run.poison(b)
    t3 = time.perf_counter()
    for step, seconds in (("set_up", t1 - t0), ("block", t2 - t1), ("verdict", t3 - t2), *run.take_parts().items()):
        spent[step] = spent.get(step, 0.0) + seconds
    return b, method, wall, wrong


def _set_up(run: _Run, reference: dict | None, params: dict, shrink: bool,
            spent: dict | None = None) -> tuple[int, str, tuple | None]:
    """The warm-up at the reference's block size (the reference's own: the worker's choice), or, with ``shrink``, at
    the smaller size the worker makes it for a candidate whose call is far slower (``shrink_hint``); again at a
    smaller size where the warm-up shows the candidate far slower than the reference (``smaller_block``)."""
    hint = shrink_hint(reference) if shrink else None
    b, method, wall, wrong = _warm_up(run, int(reference["block"]) if reference else 0, params, spent, hint)
    smaller = smaller_block(b, wall, reference) if shrink and wrong is None else None
    if smaller is not None:
        run.reset()
        b, method, _, wrong = _warm_up(run, smaller, params, spent)
    return b, method, wrong


def set_up_ahead(worker, config: str, originals: list, noise: float, params: dict, timeout: float, device,
                 check, check_calls: int, reference: dict, backward: bool = False, draws: list | None = None) -> Ahead:
    """``time_gpu``'s set-up of a candidate's configuration (its block made and captured, the warm-up block run,
    checked at once, and shrunk if the candidate is far slower than the reference) done before its timing, under a
    shared hold of the device (device_hold.py), so that the exclusive hold only times. Raises what the set-up
    raises, having unmapped what it mapped."""
    # (the warm-up's outputs are judged now, not deferred: no exclusive hold is held; time_gpu sets its own)
    run, spent = _Run(worker, config, originals, noise, timeout, check, check_calls, device, backward, False, draws), {}
    try:
        b, method, wrong = _set_up(run, reference, params, shrink=True, spent=spent)
    except BaseException:
        run.close(release=False)
        raise
    return Ahead(run, b, method, wrong, reference, spent)


def time_gpu(worker, config: str, originals: list, noise: float, params: dict, timeout: float, device,
             check=None, check_calls: int = 1, reference: dict | None = None, backward: bool = False,
             defer: bool = False, draws: list | None = None, ahead: Ahead | None = None,
             shrink: bool = True, keep: bool = False) -> GpuTiming:
    """Time configuration ``config`` (already run in ``worker``) on the GPU. ``check(out_leaves, inputs)`` says why an
    output is wrong for its inputs, or None; ``draws`` (tasks/input_draws.py) makes integer inputs fresh per call;
    ``reference`` (the reference's ``reference_figures``) sets the block size and bounds the reported times; without
    both (the reference's own timing) nothing is checked or bounded. Raises TimedCallFailed if the candidate fails in
    a timed block, WorkerError (or IpcError) if the worker breaks the exchange. ``defer``: the outputs read are
    judged later (``deferred``, deferred_checks.py). ``ahead``: the set-up done already (``set_up_ahead``, its
    run's own options; or an earlier timing's blocks, ``again``); ``shrink``: a far slower candidate may be timed in
    smaller blocks (``smaller_block``); ``keep``: a timing that ends well leaves its blocks set up (``out.run``) for
    the caller to time again or close."""
    if ahead is not None:
        run, (b, method, wrong) = ahead.run, (ahead.block, ahead.method, ahead.wrong)
        if run.checks is not None:
            run.checks.defer = defer
    else:
        run = _Run(worker, config, originals, noise, timeout, check, check_calls, device, backward, defer, draws)
    checked_before = run.check_seconds  # (a set-up ahead's warm-up checks, or an earlier timing's: not this one's)
    try:
        t0 = time.perf_counter()
        if ahead is None:
            b, method, wrong = _set_up(run, reference, params, shrink and reference is not None)
        out = GpuTiming(block=b, method=method, set_up_seconds=time.perf_counter() - t0)
        times, calls, total, start, verdicts = [], 0, 0.0, time.monotonic(), 0.0
        while wrong is None and not (times and _stop(times, total, time.monotonic() - start, b, params)):
            wall, ms, method, staged, staging = run.block(b)
            t1 = time.perf_counter()
            wrong, staged = run.verdict(staged, b, calls) or run.poison(b), None  # not alive beside the next's
            verdicts += time.perf_counter() - t1
            if wrong is not None:
                break
            used = min(ms, wall)
            out.walls_ms.append(wall)
            out.staged_ms.append(staging)
            out.device_ms.append(used)
            times.append(used / b)
            calls, total = calls + b, total + used / 1e3
        out.method, out.check_seconds, out.deferred = method, run.check_seconds - checked_before, run.checks
        out.parts = {**run.take_parts(), "block_verdict": verdicts}
        if wrong is not None:
            out.wrong_call, out.wrong = wrong
        else:
            if reference is not None:
                times = _bounded(out, times, reference, method, b)
                out.short = b < int(reference["block"]) and \
                    statistics.median(out.walls_ms) < SHORT_SHARE * float(reference.get("wall_ms") or 0.0)
            t = summarize(times)
            out.timing = Timing(t.median_ms, t.iqr_ms, calls, t.times_ms)
    except BaseException:
        run.close(release=False)
        raise
    if keep and out.wrong is None and out.timing is not None:
        out.run = run
        return out
    close(out, run)
    return out


def close(out: GpuTiming, run: _Run) -> None:
    """Unmap the timing's blocks here and have the worker release them (its part "close")."""
    t1 = time.perf_counter()
    run.close(release=True)
    out.run = None
    out.parts["close"] = out.parts.get("close", 0.0) + time.perf_counter() - t1


def again(got: GpuTiming, reference: dict | None) -> Ahead | None:
    """A timing's blocks, left set up, as the set-up of its timing again: the same block size, method and captured
    calls, new inputs drawn from a new secret seed per block as every block has (the timing again takes a new
    sample of this side's wall clock, which the set-up does not change); None where they were not left set up."""
    if got.run is None:
        return None
    run, got.run = got.run, None
    return Ahead(run, got.block, got.method, None, reference)


def time_gpu_retimed(*args, ahead: Ahead | None = None, **kwargs) -> GpuTiming:
    """``time_gpu``, again while the bound was paid by more than RETIME_RATIO, up to RETIMINGS timings. A burst of
    host load (builds on every core, the evaluator's other threads holding the interpreter) stretches this side's
    wall time of an honest timing past the bound now and then; the first timing within RETIME_RATIO counts. A
    forged report is under the bound every time: then the timing of the median bound counts, not the lowest
    (the lowest of a few is the luckiest of this side's walls, a forger's gain of a few percent), and it is
    flagged only if every timing was under the bound by more than FLAG_RATIO (one burst flags no honest timing).
    A timing in shrunk blocks that ran short (``short``) does not count: it is timed again at the reference's
    block size. ``ahead``: the first timing's set-up, done already (``set_up_ahead``). A timing again for a paid
    bound is on the blocks the timing before it set up (``again``): its set-up, warm-up and close were most of what
    a timing again cost, none of it sampled."""
    if ahead is not None and ahead.reference != kwargs.get("reference"):
        ahead.close()
        ahead = None
    timings, kept, shrink, set_up, again_s, first, parts = [], None, True, 0.0, 0.0, True, {}
    try:
        while len(timings) < RETIMINGS:
            t0 = time.perf_counter()
            given, ahead = ahead, None  # (time_gpu closes what it is given if it fails)
            got = time_gpu(*args, ahead=given, shrink=shrink, keep=True, **kwargs)
            # (a short timing is timed again at the reference's size: set up anew, its blocks closed)
            if got.ratio > RETIME_RATIO and len(timings) + 1 < RETIMINGS and not got.short:
                ahead = again(got, kwargs.get("reference"))
            elif got.run is not None:
                close(got, got.run)
            again_s += 0.0 if first else time.perf_counter() - t0
            first = False
            got.again_seconds = again_s
            set_up = got.set_up_seconds = set_up + got.set_up_seconds
            for name, seconds in parts.items():
                got.parts[name] = got.parts.get(name, 0.0) + seconds
            parts = got.parts
            if got.deferred is not None:  # every timing's read outputs are judged, the one that counts or not
                if kept is None:
                    kept = got.deferred
                elif got.deferred is not kept:  # (a timing again on the same blocks keeps into the same checks)
                    kept.merge(got.deferred)
                got.deferred = kept
            if got.wrong is not None or got.timing is None:
                return got
            if got.short:
                shrink = False
                continue
            if got.ratio <= RETIME_RATIO:
                got.deferred = kept
                return got
            timings.append(got)
    finally:
        if ahead is not None:  # (blocks left for a timing again that never ran: an error on the way)
            ahead.run.close(release=False)
    timings.sort(key=lambda t: t.ratio)
    paid = timings[(len(timings) - 1) // 2]
    paid.flagged = all(t.flagged for t in timings)
    paid.deferred, paid.set_up_seconds, paid.again_seconds, paid.parts = kept, set_up, again_s, parts
    return paid
