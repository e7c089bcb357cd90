"""Idle time inside a replayed CUDA graph, from the device's own activity records (CUPTI through torch.profiler):
the part of a graph timing that is no kernel's work (backends/cuda.py subtracts it for few-microsecond calls)."""

from __future__ import annotations

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile


def graph_idle_ms(g, calls: int) -> float | None:
    """Per call, the time the device spends idle inside one replay of the graph ``g`` of ``calls`` calls: from
    its first device activity (kernel, copy or fill, any stream) to its last, minus the union of their intervals
    (CUPTI), on the current device only. None where the profiler sees nothing or cannot be started (one is
    already running)."""
    device = torch.cuda.current_device()
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            g.replay()
            torch.cuda.synchronize()
        spans = sorted((e.start_ns(), e.end_ns()) for e in prof.profiler.kineto_results.events()
                       if e.device_type() == DeviceType.CUDA and e.device_index() == device)
    except Exception:  # noqa: BLE001 - a profiler already running, or none available
        return None
    if not spans:
        return None
    busy, (lo, hi) = 0, spans[0]
    for s, e in spans[1:]:
        if s > hi:
            busy, lo, hi = busy + hi - lo, s, e
        else:
            hi = max(hi, e)
    busy += hi - lo
    span = max(e for _, e in spans) - spans[0][0]
    return max(0.0, (span - busy) / 1e6 / calls)
