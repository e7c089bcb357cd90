"""A GPU configuration's timing as the trusted side drives it, block by block (the GPU's counterpart of blocks.py).

The worker (worker/gpu_executor.py) captures a block of B calls as one CUDA graph on input buffers it exports to
this process (protocol/cuda_ipc.py), and replays it when told. Per block, this side:

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
import random
import secrets
import statistics
import time
from dataclasses import dataclass, field

import torch

from kbench_env.pipeline.blocks import _DTYPES, TimedCallFailed
from kbench_env.pipeline.deferred_checks import DeferredChecks
from kbench_env.measure.inputs import input_stds
from kbench_env.protocol import messages as msg
from kbench_env.protocol.cuda_ipc import IpcError, Mappings
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.tasks.input_draws import varies
from kbench_env.worker.gpu_executor import MAX_BLOCK
from kbench_env.measure.stats import PRECISION, Timing, gpu_blocks_done, summarize

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
#: A block's input bytes past which this side's cached device memory is freed once its timing ends (``close``).
RETURN_STAGING_BYTES = 256 << 20
L2_FLUSH_BYTES = 256 << 20
_flush: dict = {}


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
    check_seconds: float = 0.0
    deferred: DeferredChecks | None = None  # read outputs not judged yet (deferred_checks.py)

    @property
    def fixed_ms(self) -> float:
        """The median of wall less device time less this side's staging of the block (timed on its own events)."""
        staged = self.staged_ms or [0.0] * len(self.walls_ms)
        return statistics.median(w - s - d for w, s, d in zip(self.walls_ms, staged, self.device_ms)) \
            if self.walls_ms else 0.0

    def reference_figures(self) -> dict:
        """What a candidate's timing of the same configuration is bounded by."""
        return {"block": self.block, "fixed_ms": self.fixed_ms, "method": self.method,
                "staged_ms": statistics.median(self.staged_ms) if self.staged_ms else 0.0}


class BlockInputs:
    """Per block, every call's inputs at once: [B, *shape] per input tensor, the configuration's input plus noise
    of ``noise`` times its standard deviation from a generator seeded with a secret drawn per block; an integer
    input with an ``IntegerDraw`` in ``draws`` (tasks/input_draws.py) drawn afresh for every call."""

    def __init__(self, originals: list, noise: float, block: int, device, draws: list | None = None):
        self.originals = [x.detach().to(device) if isinstance(x, torch.Tensor) else x for x in originals]
        self.stds = input_stds(self.originals)
        self.draws = list(draws or [None] * len(self.originals))
        self.varies = varies(self.originals, self.draws)
        self.noise, self.block = noise, block
        self.gen = torch.Generator(device=device)

    def draw(self) -> list:
        self.gen.manual_seed(secrets.randbits(63))
        out = []
        for i, (x, std) in enumerate(zip(self.originals, self.stds)):
            d = self.draws[i] if i < len(self.draws) else None
            if not isinstance(x, torch.Tensor):
                out.append(None)
            elif std is None and d is not None and d.varies and x.numel():
                out.append(d.draw((self.block, *x.shape), self.gen, x.dtype, x.device))
            elif std is None:
                out.append(x.unsqueeze(0).expand(self.block, *x.shape).contiguous())
            else:
                wide = x if x.dtype == torch.float64 else x.float()
                noise = torch.randn((self.block, *x.shape), generator=self.gen, device=x.device, dtype=wide.dtype)
                out.append(noise.mul_(self.noise * std).add_(wide).to(x.dtype))
        return out

    def call(self, staged: list, b: int) -> list:
        return [x if t is None else t[b] for x, t in zip(self.originals, staged)]


def _flush_l2(device) -> None:
    if str(device) not in _flush:
        _flush[str(device)] = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device)
    _flush[str(device)].zero_()


def _reply(worker, timeout: float, what: str) -> tuple[dict, object]:
    header, payload = worker.recv(timeout, what)
    if header["type"] == msg.ERROR:
        raise TimedCallFailed(header["message"])
    return header, payload


def _stop(times: list, total_s: float, elapsed_s: float, block: int, p: dict) -> bool:
    return gpu_blocks_done(times, total_s, elapsed_s, block, p.get("min_reps", 10), p.get("max_reps", 200),
                           float(p.get("min_seconds", 0.1)), float(p.get("max_seconds", 4.0)),
                           float(p.get("precision", PRECISION)))


class _Run:
    """One configuration's blocks in one worker: the mapped buffers, the inputs, the checks."""

    def __init__(self, worker, config: str, originals: list, noise: float, timeout: float, check, check_calls: int,
                 device, backward: bool, defer: bool = False, draws: list | None = None):
        self.worker, self.config, self.timeout, self.backward = worker, config, timeout, backward
        self.draws = draws
        self.originals, self.noise, self.device = originals, noise, torch.device(device)
        self.check, self.check_calls = check, max(1, check_calls)
        self.checks = DeferredChecks(check, defer) if check is not None else None
        self.maps = Mappings(self.device)
        self.rng = random.SystemRandom()
        self.dsts: list = []
        self.layout, self.outputs, self.handles = [], [], []
        self.check_seconds = 0.0

    def set_up(self, block: int, p: dict) -> tuple[int, str]:
        self.worker.send({"type": msg.GPU_SLOTS, "config": self.config, "block": block, "backward": self.backward,
                          "warmup": p.get("warmup", 3)})
        ready, _ = _reply(self.worker, self.timeout, f"timed block set-up of configuration {self.config!r}")
        b, method = ready.get("block"), str(ready.get("method", ""))
        if not isinstance(b, int) or not 1 <= b <= MAX_BLOCK or (block and b != block):
            raise WorkerError(f"the worker set up timed blocks of {b!r} calls ({block or 'its choice'} asked)")
        self.handles = list(ready.get("handles") or [])
        self.inputs = BlockInputs(self.originals, self.noise, b, self.device, self.draws)
        entries = ready.get("inputs") or []
        if len(entries) != len(self.inputs.originals):
            raise WorkerError("the worker's input buffers do not match the configuration's inputs")
        for x, e in zip(self.inputs.originals, entries):
            nbytes = b * x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0
            if nbytes == 0:  # not a tensor, or an empty one: nothing to write
                self.dsts.append(None)
                continue
            if not (isinstance(e, list) and len(e) == 3 and e[2] == nbytes):
                raise WorkerError(f"the worker's buffer for an input of {nbytes} bytes per block is {e!r}")
            self.dsts.append(self.maps.bytes_at(self._handle(e[0]), e[1], nbytes))
        self.layout, self.outputs = ready.get("layout") or [], ready.get("outputs") or []
        self.method = method
        return b, method

    def _handle(self, i) -> str:
        if not isinstance(i, int) or not 0 <= i < len(self.handles):
            raise IpcError(f"the worker named memory handle {i!r} of {len(self.handles)}")
        return self.handles[i]

    def block(self, b: int) -> tuple[float, float, str, list, float]:
        """One block: (wall ms by this side's clock, reported ms, method, the staged inputs, ms of this side's
        staging by its own device events: the copy of the inputs and the L2 flush)."""
        staged = self.inputs.draw()
        stream = torch.cuda.current_stream(self.device)
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        ev0.record(stream)
        for dst, src in zip(self.dsts, staged):
            if dst is not None and dst.numel():
                dst.copy_(src.reshape(-1).view(torch.uint8))
        _flush_l2(self.device)
        ev1.record(stream)
        torch.cuda.synchronize(self.device)
        self.worker.send({"type": msg.GPU_BLOCK, "config": self.config, "backward": self.backward})
        header, _ = self.worker.recv(self.timeout, f"timed block of configuration {self.config!r}")
        wall = (time.perf_counter() - t0) * 1e3
        if header["type"] == msg.ERROR:
            raise TimedCallFailed(header["message"])
        ms = header.get("ms")
        if not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms < 0:
            raise WorkerError(f"the worker reported a block time of {ms!r}")
        method = str(header.get("method", ""))
        if method != self.method:  # the slack depends on it: a block is what its set-up said
            raise WorkerError(f"the worker set up {self.method!r} blocks and ran one as {method!r}")
        if method == "eager-sync":
            self.layout, self.outputs = header.get("layout") or [], header.get("outputs") or []
            self.handles = list(header.get("handles") or [])
        return wall, float(ms), method, staged, ev0.elapsed_time(ev1)

    def verdict(self, staged: list, b: int, base: int) -> tuple[int, str] | None:
        """Read the outputs of ``check_calls`` calls of the block just run, chosen now, and check them (now, or
        kept for later: ``checks``); ``(call number, why)`` for the first found wrong. ``base``: the timed calls
        before this block."""
        if self.check is None:
            return None
        t0 = time.perf_counter()
        try:
            for j in sorted(self.rng.sample(range(b), min(self.check_calls, b))):
                try:
                    out = self.read(j)
                except Exception as exc:  # noqa: BLE001 - whatever the worker described: unreadable is wrong
                    return base + j, f"its output could not be read from the worker ({type(exc).__name__}: {exc})"
                wrong = self.checks.add(base + j, out, self.inputs.call(staged, j))
                if wrong is not None:
                    return wrong
            return None
        finally:
            self.check_seconds += time.perf_counter() - t0

    def poison(self, b: int) -> tuple[int, str] | None:
        """Where no input of a call can vary: every output of the block's ``b`` calls overwritten in the worker's
        memory (NaN, -1 for integers) before the next block; an output that cannot be is wrong (its call, why)."""
        if self.inputs.varies:
            return None
        for j in range(b):
            try:
                for t in self.leaves(j):
                    if isinstance(t, torch.Tensor) and t.numel():
                        t.fill_(float("nan") if t.is_floating_point() or t.is_complex() else -1)
            except Exception as exc:  # noqa: BLE001 - whatever the worker described: out of reach is wrong
                return j, f"its output could not be overwritten between blocks ({type(exc).__name__}: {exc})"
        torch.cuda.synchronize(self.device)
        return None

    def read(self, j: int) -> list:
        """Call ``j``'s output leaves, copied out of the worker's memory."""
        return [t.clone() if isinstance(t, torch.Tensor) else t for t in self.leaves(j)]

    def leaves(self, j: int) -> list:
        """Call ``j``'s output leaves as tensors mapped on the worker's memory (Python numbers as they are)."""
        row = self.outputs[j] if j < len(self.outputs) else None
        if not isinstance(row, list):
            raise IpcError("the worker described no output for this call")
        leaves, k = [], 0
        for d in self.layout:
            if "ndim" not in d:
                leaves.append(d.get("value"))
                continue
            e = row[k] if k < len(row) else None
            k += 1
            n, dtype = int(d["ndim"]), _DTYPES.get(d.get("dtype"))
            if dtype is None or not isinstance(e, list) or len(e) != 2 + 2 * n or e[0] == -1:
                raise IpcError(f"an output has no readable layout ({d}, {e})")
            leaves.append(self.maps.tensor(self._handle(e[0]), e[1], dtype, e[2:2 + n], e[2 + n:]))
        return leaves

    def close(self, release: bool) -> None:
        """Unmap the worker's memory; with ``release`` (the exchange went well) tell the worker to free it. Large
        staging goes back to the device, not into this long-lived process's cache: other workers need blocks."""
        staged = sum(d.numel() for d in self.dsts if d is not None)
        self.dsts, self.inputs = [], None
        torch.cuda.synchronize(self.device)
        self.maps.close()
        if staged >= RETURN_STAGING_BYTES:
            torch.cuda.empty_cache()
        if release:
            self.worker.send({"type": msg.RELEASE, "config": self.config})
            _reply(self.worker, self.timeout, "release of a timed block")


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


def time_gpu(worker, config: str, originals: list, noise: float, params: dict, timeout: float, device,
             check=None, check_calls: int = 1, reference: dict | None = None, backward: bool = False,
             defer: bool = False, draws: list | None = None) -> GpuTiming:
    """Time configuration ``config`` (already run in ``worker``) on the GPU. ``check(out_leaves, inputs)`` says why an
    output is wrong for its inputs, or None; ``draws`` (tasks/input_draws.py) makes integer inputs fresh per call;
    ``reference`` (the reference's ``reference_figures``) sets the block size and bounds the reported times; without
    both (the reference's own timing) nothing is checked or bounded. Raises TimedCallFailed if the candidate fails in
    a timed block, WorkerError (or IpcError) if the worker breaks the exchange. ``defer``: the outputs read are
    judged later (``deferred``, deferred_checks.py)."""
    run = _Run(worker, config, originals, noise, timeout, check, check_calls, device, backward, defer, draws)
    try:
        b, method = run.set_up(int(reference["block"]) if reference else 0, params)
        out = GpuTiming(block=b, method=method)
        wall, ms, method, staged, _ = run.block(b)  # warm-up block: checked, not a sample
        wrong, staged = run.verdict(staged, b, 0) or run.poison(b), None  # (checks keep copies)
        times, calls, total, start = [], 0, 0.0, time.monotonic()
        while wrong is None and not (times and _stop(times, total, time.monotonic() - start, b, params)):
            wall, ms, method, staged, staging = run.block(b)
            wrong, staged = run.verdict(staged, b, calls) or run.poison(b), None  # not alive beside the next's
            if wrong is not None:
                break
            used = min(ms, wall)
            out.walls_ms.append(wall)
            out.staged_ms.append(staging)
            out.device_ms.append(used)
            times.append(used / b)
            calls, total = calls + b, total + used / 1e3
        out.method, out.check_seconds, out.deferred = method, run.check_seconds, run.checks
        if wrong is not None:
            out.wrong_call, out.wrong = wrong
        else:
            if reference is not None:
                times = _bounded(out, times, reference, method, b)
            t = summarize(times)
            out.timing = Timing(t.median_ms, t.iqr_ms, calls, t.times_ms)
    except BaseException:
        run.close(release=False)
        raise
    run.close(release=True)
    return out


def time_gpu_retimed(*args, **kwargs) -> GpuTiming:
    """``time_gpu``, again while the bound was paid by more than RETIME_RATIO, up to RETIMINGS timings. A burst of
    host load (builds on every core, the evaluator's other threads holding the interpreter) stretches this side's
    wall time of an honest timing past the bound now and then; the first timing within RETIME_RATIO counts. A
    forged report is under the bound every time: then the timing of the median bound counts, not the lowest
    (the lowest of a few is the luckiest of this side's walls, a forger's gain of a few percent), and it is
    flagged only if every timing was under the bound by more than FLAG_RATIO (one burst flags no honest timing)."""
    timings, kept = [], None
    for _ in range(RETIMINGS):
        got = time_gpu(*args, **kwargs)
        if got.deferred is not None:  # every timing's read outputs are judged, the one that counts or not
            if kept is None:
                kept = got.deferred
            else:
                kept.merge(got.deferred)
            got.deferred = kept
        if got.wrong is not None or got.timing is None:
            return got
        if got.ratio <= RETIME_RATIO:
            got.deferred = kept
            return got
        timings.append(got)
    timings.sort(key=lambda t: t.ratio)
    paid = timings[(len(timings) - 1) // 2]
    paid.flagged = all(t.flagged for t in timings)
    paid.deferred = kept
    return paid
