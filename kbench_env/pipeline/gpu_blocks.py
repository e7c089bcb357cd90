"""A GPU configuration's timing as the trusted side drives it: block by block, each block's input seeds revealed
as it starts, its device time bounded by this side's clock.

The worker times blocks of calls with device events (backends/cuda.py: a captured CUDA graph replayed between
events) and fingerprints each block's outputs before it reports the block done (worker/executor.py ``Gate``). This
side decides when a block starts (GO, with a fresh secret seed from which the worker makes that block's inputs),
reads its own clock from GO to the block's DONE, decides when the timing stops, counts the calls and computes the
median and spread; the first block, which also builds the fingerprints' CUDA graph, is not a sample. A device
time the worker reports is believed only inside this side's bound of the same block: no more than the wall-clock
time from GO to DONE, and no less than that time less the exchange's own cost
(``allowance``: what the reference's blocks, the same harness on the same shapes, spent outside their device
time, with a margin). A block reported faster than that has had its time forged or its work done outside the
timed region (left to a thread or a side stream, or deferred to the fingerprinting); it is flagged and the bound
replaces the report.
"""

from __future__ import annotations

import math
import secrets
import statistics
import time
from dataclasses import dataclass, field

import torch

from kbench_env.backends.cuda import CALL_BUDGET_BLOCK, MAX_BLOCK, PRECISE_AFTER, PRECISION
from kbench_env.pipeline.blocks import TimedCallFailed
from kbench_env.pipeline.fingerprint import Reported
from kbench_env.protocol import messages as msg
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.worker.timing import Timing, median_is_precise, summarize

#: The margin on the reference's exchange cost per call, and the fixed part, of the lower bound of a block's
#: device time (graph-timed blocks); an eagerly timed block (a candidate that cannot be captured) is timed by the
#: worker's clock around its launches, with its inputs made and its outputs fingerprinted outside that: it gets
#: EAGER_PER_CALL_MS per call instead.
MARGIN = 3.0
FIXED_MS = 1.0
EAGER_PER_CALL_MS = 0.3


@dataclass
class GpuTiming:
    """What one timing exchange gave: the timing (``summarize`` of the accepted per-call times), the outputs'
    fingerprints as reported (``Reported``), the block size and method, this side's wall time and the reported
    device time per block (ms), and ``outside_bound``: how many blocks fell under the lower bound."""

    timing: Timing
    fingerprints: Reported
    block: int
    method: str
    walls_ms: list = field(default_factory=list)
    device_ms: list = field(default_factory=list)
    outside_bound: int = 0
    final: dict = field(default_factory=dict)  # the worker's closing TIMING header (its reports: reports.py)

    @property
    def overhead_ms(self) -> float:
        """Median over blocks of this side's wall time less the reported device time (the exchange's cost)."""
        return statistics.median(w - d for w, d in zip(self.walls_ms, self.device_ms)) if self.walls_ms else 0.0


def allowance_ms(reference: dict | None, block: int, method: str) -> float:
    """How far under this side's wall time a block's reported device time may be: the reference's exchange cost
    per call (``reference``: its ``overhead_ms`` and ``block``) times MARGIN for this block's calls, plus FIXED_MS;
    EAGER_PER_CALL_MS per call for an eagerly timed block. Unbounded (inf) without a reference figure."""
    if method != "cuda-graph":
        return FIXED_MS + EAGER_PER_CALL_MS * block
    if not reference or not reference.get("block"):
        return math.inf
    per_call = max(reference["overhead_ms"], 0.0) / reference["block"]
    return FIXED_MS + MARGIN * max(reference["overhead_ms"], per_call * block)


def _stop(times: list, total_s: float, elapsed_s: float, block: int, p: dict) -> bool:
    min_blocks = max(5, -(-int(p.get("min_reps", 10)) // block))
    max_blocks = max(min_blocks, -(-int(p.get("max_reps", 200)) * CALL_BUDGET_BLOCK // block))
    min_seconds = float(p.get("min_seconds", 0.1))
    if len(times) >= max_blocks or elapsed_s > float(p.get("max_seconds", 4.0)):
        return True
    precise = total_s >= PRECISE_AFTER * min_seconds and median_is_precise(times, float(p.get("precision", PRECISION)))
    return len(times) >= min_blocks and (total_s >= min_seconds or precise)


def drive(worker, request: dict, params: dict, timeout: float, revealed: dict | None = None,
          reference: dict | None = None) -> GpuTiming:
    """Send the TIME ``request`` and drive its blocks. ``revealed`` (the trusted side's TimedInputs.revealed of
    the same configuration) receives each block's seeds; ``reference`` is the reference's timing figures for the
    lower bound (None: the reference's own timing, bounded above only)."""
    worker.send(request)
    ready = _reply(worker, timeout, "timing set-up")
    block, method = int(ready.get("block", 0)), str(ready.get("method", ""))
    if not 1 <= block <= MAX_BLOCK:
        raise WorkerError(f"the worker proposed timed blocks of {block} calls (1 to {MAX_BLOCK} expected)")
    bound = allowance_ms(reference, block, method)
    times, walls, device, rows, counts, outside = [], [], [], [], [], 0
    j, total, start = 0, 0.0, time.monotonic()
    while not (times and _stop(times, total, time.monotonic() - start, block, params)):
        seed = secrets.randbits(62)
        if revealed is not None:
            revealed.update({j + b: seed + b for b in range(block)})
        t0 = time.perf_counter()
        worker.send({"type": msg.GO, "seed": seed})
        header, payload = worker.recv(timeout, f"timed block of configuration {request['config']!r}")
        wall_ms = (time.perf_counter() - t0) * 1e3
        if header["type"] == msg.ERROR:
            raise TimedCallFailed(header["message"])
        ms = header.get("ms")
        if not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms < 0:
            raise WorkerError(f"the worker reported a block time of {ms!r}")
        if j and (ms > wall_ms or ms < wall_ms - bound):  # outside this side's bound: the bound replaces it
            outside += 1
            ms = min(wall_ms, max(ms, wall_ms - bound))
        got = header.get("fingerprint_counts")
        fp = payload.get("fingerprints") if isinstance(payload, dict) else None
        if not (isinstance(got, list) and len(got) == block and isinstance(fp, torch.Tensor)):
            got, fp = [0] * block, torch.zeros(0, 0, dtype=torch.float64)  # unreadable: matches no reference
        rows.append(fp)
        counts.extend(got)
        j += block
        if j == block:  # the first block builds the fingerprints' graph (fingerprint.pending_block): no sample
            continue
        times.append(ms / block)
        walls.append(wall_ms)
        device.append(float(header["ms"]))
        total += ms / 1e3
    worker.send({"type": msg.STOP})
    final = _reply(worker, timeout, "end of timing")
    width = next((r.shape[1] for r in rows if r.dim() == 2 and r.shape[0]), 0)
    table = torch.cat([r for r in rows if r.dim() == 2 and r.shape[1] == width]) if width else torch.zeros(0, 0)
    return GpuTiming(summarize(times), Reported(table.to(torch.float64), counts), block, method, walls, device,
                     outside, final)


def _reply(worker, timeout: float, what: str) -> dict:
    header, _ = worker.recv(timeout, what)
    if header["type"] == msg.ERROR:
        raise TimedCallFailed(header["message"])
    return header
