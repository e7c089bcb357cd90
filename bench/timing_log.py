"""Every GPU timing of a bench run as one JSON line: the timing's figures against the bound its reference sets
(pipeline/gpu_blocks.py), for finding why an honest candidate's bound was paid and it was timed again.

What the Evaluator returns says only how long the timings again took (the phase ``timing_again``); the figures of a
timing against its bound stay on the trusted side, as they should: an observation that said how far under the
bound a report fell would teach a forger where the bound is. A bench run may keep them: ``install(path)`` wraps
``gpu_blocks.time_gpu`` in this process and appends, per timing, the task, the candidate's source hash, the
configuration, whether it ran on blocks set up ahead or left by the timing before (``on``), and the medians of its
blocks' wall, reported, staged and fixed times beside the reference's, its ratio (bound over report; above
gpu_blocks.RETIME_RATIO it is timed again) and its seconds.

    python bench/rl_batch.py ... --timings-log runs/timings.jsonl
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from pathlib import Path


def _median(xs) -> float | None:
    return round(statistics.median(xs), 5) if xs else None


def _evaluation() -> tuple[str | None, str | None]:
    """(task name, source hash) of the evaluation whose stage called the timing: the ``ctx`` (pipeline/context.py's
    StageContext) of a caller's frame, or (None, None)."""
    frame = sys._getframe(2)
    for _ in range(12):
        if frame is None:
            break
        ctx = frame.f_locals.get("ctx")
        if ctx is not None and hasattr(ctx, "task") and hasattr(ctx, "result"):
            return getattr(ctx.task, "name", None), getattr(ctx.result, "source_hash", None) or None
        frame = frame.f_back
    return None, None


def figures(got, config: str, reference: dict | None, on: str, seconds: float) -> dict:
    """One timing's line (``got``: a gpu_blocks.GpuTiming)."""
    walls, device, staged = got.walls_ms, got.device_ms, got.staged_ms
    ref = reference or {}
    return {"config": config, "on": on, "block": got.block, "method": got.method, "blocks": len(walls),
            "wall_ms": _median(walls), "device_ms": _median(device), "staged_ms": _median(staged),
            "fixed_ms": round(got.fixed_ms, 5) if walls else None,
            "reference": {k: ref.get(k) for k in ("block", "wall_ms", "staged_ms", "fixed_ms")} if ref else None,
            "ratio": round(got.ratio, 5), "short": got.short, "flagged": got.flagged, "wrong": got.wrong is not None,
            "set_up_s": round(got.set_up_seconds, 4), "seconds": round(seconds, 4)}


def install(path) -> callable:
    """Wrap ``gpu_blocks.time_gpu`` so that every timing appends its line to ``path``; returns the undo."""
    from kbench_env.pipeline import gpu_blocks

    real, out, lock = gpu_blocks.time_gpu, Path(path), threading.Lock()

    def timed(*a, ahead=None, **k):
        on = "new" if ahead is None else ("set up ahead" if ahead.spent else "the timing before's blocks")
        task, source = _evaluation()
        t0 = time.perf_counter()
        try:
            got = real(*a, ahead=ahead, **k)
        except BaseException as exc:
            row = {"config": a[1] if len(a) > 1 else None, "on": on, "error": type(exc).__name__}
            raise
        else:
            row = figures(got, a[1] if len(a) > 1 else None, k.get("reference"), on, time.perf_counter() - t0)
            return got
        finally:
            row.update(task=task, source_hash=source, thread=threading.get_ident(), at=round(time.time(), 3))
            with lock, out.open("a") as f:
                f.write(json.dumps(row) + "\n")

    gpu_blocks.time_gpu = timed

    def undo() -> None:
        gpu_blocks.time_gpu = real

    return undo
