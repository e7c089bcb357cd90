"""A GPU's calibration (copy bandwidth, matrix-product rates) measured so that it repeats between processes: the
reference cache's drift check compares it with the one its entries were timed beside (pipeline/reference_cache.py).

The CPU's form (backends/base.py) times one 64 MB copy per call by the host clock around a device-wide synchronise:
on a GPU that copy takes ~30 us, of the order of the synchronise's own latency, so the figure moved with the host's
load (builds on every core) and with the allocation's placement, enough to invalidate a cache between processes.
Here every figure is device time between CUDA events around several back-to-back
calls (no host clock inside), on a 256 MB copy (~0.1 ms each), after a warm-up that brings the clocks up; it is
measured in ROUNDS rounds, each on buffers allocated afresh, and the median of the rounds' best is the figure, so a
round slowed by another process's kernels (a worker starting beside it) does not move it.
"""

from __future__ import annotations

import statistics
import time

import torch

from kbench_env.tasks.task import DTYPES

ROUNDS = 5
COPY_BYTES = 256 << 20
COPIES = 8  # copies between one pair of events
MATMUL_SIZE = 8192
MATMULS = 2
GROUPS = 3  # event-timed groups per round and figure: the round's figure is its best (load only slows)
WARMUP_S = 0.2


def _best_ms(fn, calls: int) -> float:
    """The least device time of ``calls`` back-to-back ``fn()``, over GROUPS groups (ms per call)."""
    best = float("inf")
    for _ in range(GROUPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / calls)
    return best


def _warm_up(device) -> None:
    """Matrix products for WARMUP_S: an idle GPU's clocks are low, and the first figures would read them."""
    a = torch.randn(4096, 4096, device=device)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < WARMUP_S:
        a @ a
        torch.cuda.synchronize(device)


def calibrate_gpu(device: str, dtypes: list) -> dict:
    """``{"bandwidth": bytes/s, "flops": {dtype: FLOP/s}, "rounds": {figure: [per-round figures]}}`` of ``device``:
    each figure the median over ROUNDS rounds (module docstring)."""
    dev = torch.device(device)
    _warm_up(dev)
    bandwidth: list = []
    flops: dict = {name: [] for name in dtypes}
    for _ in range(ROUNDS):
        x = torch.empty(COPY_BYTES // 4, device=dev)
        y = torch.empty_like(x)
        bandwidth.append(2 * COPY_BYTES / (_best_ms(lambda: y.copy_(x), COPIES) / 1e3))
        del x, y
        for name in dtypes:
            a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device=dev).to(DTYPES[name])
            flops[name].append(2 * MATMUL_SIZE**3 / (_best_ms(lambda: a @ a, MATMULS) / 1e3))
            del a
    torch.cuda.synchronize(dev)
    return {"bandwidth": statistics.median(bandwidth),
            "flops": {name: statistics.median(v) for name, v in flops.items()},
            "rounds": {"bandwidth": bandwidth, **{f"flops[{k}]": v for k, v in flops.items()}}}
